#include "rlflow/exec/compare.h"

#include <cstdio>
#include <cmath>
#include <random>

namespace rlflow::exec {

std::vector<ir::TensorPtr> random_inputs(const ir::Graph& g, uint64_t seed) {
  std::vector<ir::TensorPtr> out;
  std::mt19937_64 rng(seed);
  // An integer input a Div or Mod divides by is drawn from {1, 2}, not {0, 1}: a model that divides
  // by it is fine, and a zero there would fail verification for nothing (issue 41).
  std::vector<bool> divisor(g.size(), false);
  for (const auto& n : g.nodes()) {
    const bool divides = n.kind == ir::OpKind::kDiv ||
                         (n.kind == ir::OpKind::kOpaque && (std::get<ir::OpaqueParams>(n.params).op_type == "Mod" ||
                                                            std::get<ir::OpaqueParams>(n.params).op_type == "Div"));
    if (divides && n.inputs.size() > 1) divisor[static_cast<size_t>(n.inputs[1].node)] = true;
  }
  for (auto id : g.inputs()) {
    const auto& t = g.node(id).outputs[0];
    const auto n = static_cast<size_t>(t.numel());
    const uint64_t lowest = divisor[static_cast<size_t>(id)] ? 1 : 0;
    switch (t.dtype) {
      case ir::DType::kFloat64:
      case ir::DType::kFloat16:
      case ir::DType::kBFloat16: {  // drawn in double, rounded to the input's type
        std::normal_distribution<double> d;
        std::vector<double> v(n);
        for (auto& x : v) x = d(rng);
        out.push_back(ir::Tensor::from_doubles(t.dtype, t.shape, v));
        break;
      }
      case ir::DType::kInt64: {
        std::vector<int64_t> v(n);
        for (auto& x : v) x = static_cast<int64_t>(lowest + rng() % 2);
        out.push_back(ir::Tensor::from_vector(t.dtype, t.shape, v));
        break;
      }
      case ir::DType::kInt32: {
        std::vector<int32_t> v(n);
        for (auto& x : v) x = static_cast<int32_t>(lowest + rng() % 2);
        out.push_back(ir::Tensor::from_vector(t.dtype, t.shape, v));
        break;
      }
      case ir::DType::kBool:
      case ir::DType::kUInt8:
      case ir::DType::kInt8: {
        std::vector<uint8_t> v(n);
        for (auto& x : v) x = static_cast<uint8_t>(rng() % 2);
        out.push_back(ir::Tensor::from_vector(t.dtype, t.shape, v));
        break;
      }
      default: {
        std::normal_distribution<float> d;
        std::vector<float> v(n);
        for (auto& x : v) x = d(rng);
        out.push_back(ir::Tensor::from_vector(ir::DType::kFloat32, t.shape, v));
      }
    }
  }
  return out;
}

double dtype_epsilon(ir::DType t) {
  switch (t) {
    case ir::DType::kFloat64: return 0x1p-52;
    case ir::DType::kFloat32: return 0x1p-23;
    case ir::DType::kFloat16: return 0x1p-10;
    case ir::DType::kBFloat16: return 0x1p-7;
    default: return 0;
  }
}

Tolerance output_tolerance(const ir::Tensor& ref, double atol, double rtol, double half_ulps) {
  if (!ir::is_half(ref.dtype())) return {atol, rtol};
  const double eps = half_ulps * dtype_epsilon(ref.dtype());
  double scale = 0;
  for (double v : ref.as_double())
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  return {std::max(atol, eps * std::max(1.0, scale)), std::max(rtol, eps)};
}

Status check_tolerance(double value, const std::string& what) {
  if (!std::isfinite(value) || value < 0)
    return Error{ErrorCode::kUsage, what + " must be a finite number >= 0 (got " + std::to_string(value) + ")"};
  return {};
}

OutputDiff diff_tensors(const ir::Tensor& a, const ir::Tensor& b, double atol, double rtol) {
  OutputDiff d;
  if (a.shape() != b.shape() || !check_tolerance(atol, "atol").ok() || !check_tolerance(rtol, "rtol").ok()) {
    d.ok = false;
    d.max_abs_diff = INFINITY;
    return d;
  }
  auto va = a.as_double(), vb = b.as_double();
  for (size_t i = 0; i < va.size(); ++i) {
    const double diff = std::fabs(va[i] - vb[i]);
    // NaNs and infinities compare by class: inf - inf is no difference.
    const bool both_nan = std::isnan(va[i]) && std::isnan(vb[i]);
    if (both_nan || (std::isinf(va[i]) && va[i] == vb[i])) continue;
    if (std::isnan(diff) || diff > atol + rtol * std::fabs(vb[i])) d.ok = false;
    if (std::isnan(diff)) d.max_abs_diff = INFINITY;
    else d.max_abs_diff = std::max(d.max_abs_diff, diff);
    d.max_ref_abs = std::max(d.max_ref_abs, std::fabs(vb[i]));
  }
  return d;
}

Expected<Comparison> compare_graphs(const ir::Graph& reference, const ir::Graph& candidate, const CompareOptions& opts) {
  RLFLOW_TRY_STATUS(check_tolerance(opts.atol, "atol"));
  RLFLOW_TRY_STATUS(check_tolerance(opts.rtol, "rtol"));
  if (reference.outputs().size() != candidate.outputs().size())
    return Comparison{false, INFINITY, {}, "the graphs have different numbers of outputs"};
  auto ia = reference.inputs(), ib = candidate.inputs();
  if (ia.size() != ib.size()) return Comparison{false, INFINITY, {}, "the graphs have different inputs"};
  for (size_t k = 0; k < ia.size(); ++k)
    if (reference.node(ia[k]).outputs[0] != candidate.node(ib[k]).outputs[0])
      return Comparison{false, INFINITY, {}, "input " + std::to_string(k) + " differs in type"};
  Executor ex(opts.compute);
  Comparison c;
  c.outputs.resize(reference.outputs().size());
  for (int trial = 0; trial < opts.trials; ++trial) {
    auto inputs = random_inputs(reference, opts.seed + static_cast<uint64_t>(trial));
    auto ra = ex.run(reference, inputs);
    // The reference (the user's model) itself cannot run at these sizes: a bad input, not a failed
    // check of a rewrite (an unsupported op stays what it is: the caller then compares structure).
    if (!ra) return ra.error().code == ErrorCode::kUnsupported ? ra.error() : Error::bad_input("the input model does not run: " + ra.error().message);
    auto rb = ex.run(candidate, inputs);
    if (!rb) return rb.error();
    for (size_t k = 0; k < ra->size(); ++k) {
      auto& od = c.outputs[k];
      od.name = reference.outputs()[k].name;
      if ((*ra)[k]->dtype() != (*rb)[k]->dtype()) {
        od.ok = false;
        od.max_abs_diff = INFINITY;
        continue;
      }
      const auto [atol, rtol] = output_tolerance(*(*ra)[k], opts.atol, opts.rtol, opts.half_ulps);
      od.atol = std::max(od.atol, atol);
      od.rtol = std::max(od.rtol, rtol);
      auto d = diff_tensors(*(*rb)[k], *(*ra)[k], atol, rtol);
      od.ok = od.ok && d.ok;
      od.max_abs_diff = std::max(od.max_abs_diff, d.max_abs_diff);
      od.max_ref_abs = std::max(od.max_ref_abs, d.max_ref_abs);
    }
  }
  for (const auto& od : c.outputs) {
    c.max_abs_diff = std::max(c.max_abs_diff, od.max_abs_diff);
    if (!od.ok && c.ok) {
      c.ok = false;
      // %.3g: a difference of 3e-7 against a tolerance of 0 reads as such, not as "0.000000".
      char buf[160];
      std::snprintf(buf, sizeof buf, "max abs diff %.3g (atol %.3g, rtol %.3g)", od.max_abs_diff, od.atol, od.rtol);
      c.message = "output '" + od.name + "' differs: " + buf;
    }
  }
  return c;
}

}  // namespace rlflow::exec
