#include "rlflow/cost/analytic.h"

#include <algorithm>
#include <cstdio>

namespace rlflow::cost {

AnalyticCostModel::AnalyticCostModel(DeviceProfile profile) : profile_(std::move(profile)) {}

double AnalyticCostModel::cost_ms(const OpWork& w) const {
  if (w.view) return profile_.view_overhead_us * 1e-3;
  // rates are per second in units of 1e9: FLOPs / (GFLOP/s * 1e9) s = FLOPs / GFLOP/s * 1e-6 ms.
  const double compute_ms = w.flops / profile_.rate(w.compute, w.half).effective() * 1e-6;
  const double memory_ms = w.bytes / profile_.rate(w.memory).effective() * 1e-6;
  return profile_.kernel_overhead_us * 1e-3 + std::max(compute_ms, memory_ms);
}

namespace {

// The eager chain an Attention op replaces, as onnxruntime runs it: Q K^T (the scale folds into it,
// FusedMatMul), the mask added, Softmax over (B, H, S, L), then P V; each one kernel.
std::vector<OpSignature> attention_chain(const OpSignature& sig) {
  const auto& q = sig.inputs[0];
  const auto& k = sig.inputs[1];
  const auto& v = sig.inputs[2];
  const auto& p = std::get<ir::AttentionParams>(sig.params);
  int64_t b = q.shape[0], h, s, l, e, ev;
  if (q.shape.size() == 4) {
    h = q.shape[1], s = q.shape[2], e = q.shape[3], l = k.shape[2], ev = v.shape[3];
  } else {  // 3-D (B, S, H*E) with the head counts as attributes
    h = std::max<int64_t>(p.q_num_heads, 1), s = q.shape[1], e = q.shape[2] / h, l = k.shape[1];
    ev = v.shape[2] / std::max<int64_t>(p.kv_num_heads, 1);
  }
  const auto f = [&](std::vector<int64_t> shape) { return ir::TensorType{q.dtype, std::move(shape)}; };
  std::vector<OpSignature> out;
  auto add = [&](ir::OpKind kind, std::vector<ir::TensorType> ins, ir::TensorType o, ir::OpParams params = {}) {
    OpSignature x;
    x.kind = kind;
    x.params = std::move(params);
    x.inputs = std::move(ins);
    x.input_is_constant.assign(x.inputs.size(), false);
    x.outputs = {std::move(o)};
    out.push_back(std::move(x));
  };
  const auto scores = f({b, h, s, l});
  add(ir::OpKind::kMatMul, {f({b, h, s, e}), f({b, h, e, l})}, scores);
  if (sig.inputs.size() > 3) add(ir::OpKind::kAdd, {scores, sig.inputs[3]}, scores);
  add(ir::OpKind::kSoftmax, {scores}, scores, ir::AxisParams{3});
  add(ir::OpKind::kMatMul, {scores, f({b, h, l, ev})}, f({b, h, s, ev}));
  return out;
}

}  // namespace

Expected<double> AnalyticCostModel::op_cost(const OpSignature& sig) {
  const auto cls = ir::op_info(sig.kind).cost;
  if (cls == ir::CostClass::kOpaque) return kOpaqueCostMs;
  if (cls == ir::CostClass::kFree) return 0.0;
  // onnxruntime's CPU Attention kernel pays only at wide heads: 1.07-1.27x faster than the eager chain
  // at head size 64 (BERT and LLaMA shapes, 1 thread, docs/measurements/measure_fused_ops-2026-11-25.md), but
  // HF exports with heads of 8 and 16 ran 0.88-0.98x as fast as their inputs in onnxruntime 1.32
  // (docs/transformers.md, 2026-11-26). Below kOrtAttentionMinHead the op is priced above the chain it
  // replaces (the chain's kernels plus its own), so the ort cost never prefers it there; the other
  // fusions of the same file are then the candidate that is written and measured.
  if (sig.kind == ir::OpKind::kAttention && profile_.runtime == "onnxruntime" && sig.inputs.size() >= 3) {
    const auto& q = sig.inputs[0];
    const auto& p = std::get<ir::AttentionParams>(sig.params);
    const int64_t head = q.shape.size() == 4 ? q.shape[3] : q.shape.back() / std::max<int64_t>(p.q_num_heads, 1);
    if (head < kOrtAttentionMinHead) {
      double ms = cost_ms(op_work(sig));
      for (const auto& c : attention_chain(sig)) ms += cost_ms(op_work(c));
      return ms;
    }
  }
  return cost_ms(op_work(sig));
}

std::string AnalyticCostModel::device_fingerprint() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(profile_.hash()));
  return "analytic/" + profile_.name + "/" + buf;
}

std::vector<bool> AnalyticCostModel::runtime_fused(const ir::Graph& g, const std::vector<bool>& constant) const {
  if (profile_.runtime == "onnxruntime") return onnxruntime_fused_nodes(g, constant);
  return {};
}

}  // namespace rlflow::cost
