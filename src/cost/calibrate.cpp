#include "rlflow/cost/calibrate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "rlflow/ir/shape_inference.h"

namespace rlflow::cost {

namespace {

using ir::OpKind;
using ir::Shape;

struct Operand {
  Shape shape;
  bool constant = false;
  ir::DType dtype = ir::DType::kFloat32;
};

Expected<OpSignature> make_sig(OpKind kind, ir::OpParams params, std::vector<Operand> ins) {
  OpSignature s;
  s.kind = kind;
  s.params = std::move(params);
  for (auto& in : ins) {
    s.inputs.push_back({in.dtype, std::move(in.shape)});
    s.input_is_constant.push_back(in.constant);
  }
  auto out = ir::infer_types(kind, s.params, s.inputs);
  if (!out) return out.error();
  s.outputs = std::move(*out);
  return s;
}

ir::ConvParams conv_params(int64_t k, int64_t stride, ir::Activation act = ir::Activation::kNone) {
  ir::ConvParams p;
  p.strides = {stride, stride};
  p.pads = {k / 2, k / 2, k / 2, k / 2};
  p.dilations = {1, 1};
  p.act = act;
  return p;
}

ir::PoolParams pool_params(int64_t k, int64_t stride, int64_t pad) {
  ir::PoolParams p;
  p.kernel = {k, k};
  p.strides = {stride, stride};
  p.pads = {pad, pad, pad, pad};
  return p;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Solves the n x n system a x = b in place (Gaussian elimination, partial pivoting); false if singular.
bool solve(std::vector<std::vector<double>>& a, std::vector<double>& b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[piv][c])) piv = r;
    if (std::fabs(a[piv][c]) < 1e-300) return false;
    std::swap(a[piv], a[c]);
    std::swap(b[piv], b[c]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = 0; c < n; ++c) b[c] /= a[c][c];
  return true;
}

// The fitted unknowns, as milliseconds per unit of work: per FLOP of each compute class, per byte
// of each memory class, and the per-kernel overhead.
enum Param { kConvP, kMatMulP, kVectorP, kSpecialP, kPoolP, kStreamP, kLayoutP, kOverheadP, kNumParams };

Param compute_param(ComputeClass c) {
  switch (c) {
    case ComputeClass::kConv: return kConvP;
    case ComputeClass::kMatMul: return kMatMulP;
    case ComputeClass::kVector: return kVectorP;
    case ComputeClass::kSpecial: return kSpecialP;
    case ComputeClass::kPool: return kPoolP;
  }
  return kVectorP;
}
Param memory_param(MemoryClass m) { return m == MemoryClass::kLayout ? kLayoutP : kStreamP; }

// ms = FLOPs / (GFLOP/s) * 1e-6, so the coefficient of a rate r is 1e-6 / r.
double coef(const Throughput& t) { return 1e-6 / t.effective(); }

using Theta = std::array<double, kNumParams>;

Theta theta_of(const DeviceProfile& p) {
  return {coef(p.conv),   coef(p.matmul), coef(p.vector),          coef(p.special),
          coef(p.pool),   coef(p.stream), coef(p.layout), p.kernel_overhead_us * 1e-3};
}

double predict(const Theta& t, const OpWork& w) {
  return t[kOverheadP] + std::max(w.flops * t[compute_param(w.compute)], w.bytes * t[memory_param(w.memory)]);
}

double objective(const Theta& t, const std::vector<CalibrationSample>& s) {
  double sum = 0;
  for (const auto& x : s) {
    if (x.work.view) continue;
    const double r = (predict(t, x.work) - x.measured_ms) / x.measured_ms;
    sum += r * r;
  }
  return sum;
}

// One least-squares step for a fixed assignment of samples to their bounds. A parameter that no
// sample informs keeps its current value; one that comes out non-positive is held (a rate at its
// current value, the overhead at zero) and the rest are solved again: a small active-set method.
Theta refit(const Theta& cur, const std::vector<CalibrationSample>& s, const std::vector<bool>& memory_bound) {
  Theta held = cur;
  std::array<bool, kNumParams> seen{}, fixed{};
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].work.view) continue;
    seen[memory_bound[i] ? memory_param(s[i].work.memory) : compute_param(s[i].work.compute)] = true;
  }
  seen[kOverheadP] = true;
  for (int round = 0; round <= kNumParams; ++round) {
    std::vector<int> free_params;
    for (int p = 0; p < kNumParams; ++p)
      if (seen[p] && !fixed[p]) free_params.push_back(p);
    if (free_params.empty()) return held;
    const size_t n = free_params.size();
    std::vector<std::vector<double>> ata(n, std::vector<double>(n, 0));
    std::vector<double> atb(n, 0);
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i].work.view) continue;
      // The relative residual (prediction - measured) / measured is linear in the parameters.
      std::array<double, kNumParams> row{};
      const Param term = memory_bound[i] ? memory_param(s[i].work.memory) : compute_param(s[i].work.compute);
      row[term] = (memory_bound[i] ? s[i].work.bytes : s[i].work.flops) / s[i].measured_ms;
      row[kOverheadP] = 1.0 / s[i].measured_ms;
      double target = 1.0;
      for (int p = 0; p < kNumParams; ++p)
        if (fixed[p] || !seen[p]) target -= row[p] * held[p];
      for (size_t a = 0; a < n; ++a) {
        atb[a] += row[free_params[a]] * target;
        for (size_t b = 0; b < n; ++b) ata[a][b] += row[free_params[a]] * row[free_params[b]];
      }
    }
    if (!solve(ata, atb)) return held;
    bool clamped = false;
    for (size_t a = 0; a < n; ++a) {
      if (atb[a] <= 0) {
        fixed[free_params[a]] = true;
        if (free_params[a] == kOverheadP) held[kOverheadP] = 0;
        clamped = true;
      }
    }
    if (!clamped) {
      Theta next = held;
      for (size_t a = 0; a < n; ++a) next[free_params[a]] = atb[a];
      return next;
    }
  }
  return held;
}

std::pair<double, double> rel_errors(const std::vector<CalibrationSample>& s, bool fitted) {
  std::vector<double> e;
  for (const auto& x : s) e.push_back(std::fabs((fitted ? x.fitted_ms : x.base_ms) - x.measured_ms) / x.measured_ms);
  return {median(e), e.empty() ? 0 : *std::max_element(e.begin(), e.end())};
}

}  // namespace

Expected<std::vector<std::pair<std::string, OpSignature>>> calibration_ops(int batch) {
  const int64_t B = std::max(1, batch);
  std::vector<std::pair<std::string, OpSignature>> ops;
  Status failed;
  auto add = [&](std::string label, OpKind k, ir::OpParams p, std::vector<Operand> ins) {
    auto s = make_sig(k, std::move(p), std::move(ins));
    if (!s) {
      if (failed.ok()) failed = s.error().with_context("calibration op " + label);
      return;
    }
    ops.emplace_back(std::move(label), std::move(*s));
  };
  auto conv = [&](const char* what, int64_t cin, int64_t cout, int64_t hw, int64_t k, int64_t stride,
                  ir::Activation act = ir::Activation::kNone) {
    add(std::string("Conv ") + what, OpKind::kConv, conv_params(k, stride, act),
        {{{B, cin, hw, hw}}, {{cout, cin, k, k}, true}, {{cout}, true}});
  };
  // CNN convolutions (ResNet, SqueezeNet, Inception shapes).
  conv("7x7/2 3->64 224", 3, 64, 224, 7, 2);
  conv("3x3 64->64 56", 64, 64, 56, 3, 1);
  conv("3x3 64->64 56 +relu", 64, 64, 56, 3, 1, ir::Activation::kRelu);
  conv("3x3 128->128 28", 128, 128, 28, 3, 1);
  conv("3x3/2 128->256 28", 128, 256, 28, 3, 2);
  conv("3x3 256->256 14", 256, 256, 14, 3, 1);
  conv("3x3 512->512 7", 512, 512, 7, 3, 1);
  conv("1x1 64->256 56", 64, 256, 56, 1, 1);
  conv("1x1 256->64 56", 256, 64, 56, 1, 1);
  conv("1x1 1024->256 14", 1024, 256, 14, 1, 1);
  conv("1x1 128->16 55 +relu", 128, 16, 55, 1, 1, ir::Activation::kRelu);
  conv("3x3 16->64 55 +relu", 16, 64, 55, 3, 1, ir::Activation::kRelu);
  {
    ir::ConvParams p;
    p.strides = {1, 1};
    p.pads = {0, 3, 0, 3};
    p.dilations = {1, 1};
    add("Conv 1x7 128->128 17", OpKind::kConv, p, {{{B, 128, 17, 17}}, {{128, 128, 1, 7}, true}, {{128}, true}});
  }
  // Transformer GEMMs (BERT-base sequence 128, ViT-B/16 sequence 197).
  add("MatMul 128x768 @ 768x768", OpKind::kMatMul, {}, {{{B, 128, 768}}, {{768, 768}, true}});
  add("MatMul 128x768 @ 768x3072", OpKind::kMatMul, {}, {{{B, 128, 768}}, {{768, 3072}, true}});
  add("MatMul 128x3072 @ 3072x768", OpKind::kMatMul, {}, {{{B, 128, 3072}}, {{3072, 768}, true}});
  add("MatMul 197x768 @ 768x2304", OpKind::kMatMul, {}, {{{B, 197, 768}}, {{768, 2304}, true}});
  add("MatMul attention scores 12x128x64", OpKind::kMatMul, {}, {{{B, 12, 128, 64}}, {{B, 12, 64, 128}}});
  add("MatMul attention values 12x128x128", OpKind::kMatMul, {}, {{{B, 12, 128, 128}}, {{B, 12, 128, 64}}});
  {
    ir::GemmParams p;
    p.trans_b = true;
    add("Gemm 2048->1000", OpKind::kGemm, p, {{{B, 2048}}, {{1000, 2048}, true}, {{1000}, true}});
    add("Gemm 512->1000", OpKind::kGemm, p, {{{B, 512}}, {{1000, 512}, true}, {{1000}, true}});
  }
  // Elementwise.
  add("Add 64x56x56", OpKind::kAdd, {}, {{{B, 64, 56, 56}}, {{B, 64, 56, 56}}});
  add("Add 256x56x56", OpKind::kAdd, {}, {{{B, 256, 56, 56}}, {{B, 256, 56, 56}}});
  add("Add bias 128x768", OpKind::kAdd, {}, {{{B, 128, 768}}, {{768}, true}});
  add("Mul 128x3072", OpKind::kMul, {}, {{{B, 128, 3072}}, {{B, 128, 3072}}});
  add("Div scalar 12x128x128", OpKind::kDiv, {}, {{{B, 12, 128, 128}}, {{}, true}});
  add("Relu 64x112x112", OpKind::kRelu, {}, {{{B, 64, 112, 112}}});
  add("Relu 512x7x7", OpKind::kRelu, {}, {{{B, 512, 7, 7}}});
  add("Erf 128x3072", OpKind::kErf, {}, {{{B, 128, 3072}}});
  add("Gelu 128x3072", OpKind::kGelu, ir::GeluParams{}, {{{B, 128, 3072}}});
  add("Sigmoid 128x768", OpKind::kSigmoid, {}, {{{B, 128, 768}}});
  add("Tanh 128x768", OpKind::kTanh, {}, {{{B, 128, 768}}});
  add("Sqrt 128x1", OpKind::kSqrt, {}, {{{B, 128, 1}}});
  // Normalisation, softmax, pooling, reductions.
  add("Softmax 12x128x128", OpKind::kSoftmax, ir::AxisParams{3}, {{{B, 12, 128, 128}}});
  add("Softmax 12x197x197", OpKind::kSoftmax, ir::AxisParams{3}, {{{B, 12, 197, 197}}});
  add("LayerNorm 128x768", OpKind::kLayerNorm, ir::NormParams{2, 1e-5}, {{{B, 128, 768}}, {{768}, true}, {{768}, true}});
  add("BatchNorm 64x112x112", OpKind::kBatchNorm, ir::NormParams{1, 1e-5},
      {{{B, 64, 112, 112}}, {{64}, true}, {{64}, true}, {{64}, true}, {{64}, true}});
  add("MaxPool 3x3/2 64x112", OpKind::kMaxPool, pool_params(3, 2, 1), {{{B, 64, 112, 112}}});
  add("AveragePool 3x3 192x35", OpKind::kAveragePool, pool_params(3, 1, 1), {{{B, 192, 35, 35}}});
  add("GlobalAveragePool 2048x7x7", OpKind::kGlobalAveragePool, {}, {{{B, 2048, 7, 7}}});
  add("ReduceMean 128x768", OpKind::kReduceMean, ir::AxesParams{{2}, true}, {{{B, 128, 768}}});
  // Layout ops.
  add("Transpose heads 128x12x64", OpKind::kTranspose, ir::TransposeParams{{0, 2, 1, 3}}, {{{B, 128, 12, 64}}});
  add("Transpose keys 12x128x64", OpKind::kTranspose, ir::TransposeParams{{0, 1, 3, 2}}, {{{B, 12, 128, 64}}});
  add("Concat 4x64x35x35", OpKind::kConcat, ir::AxisParams{1},
      {{{B, 64, 35, 35}}, {{B, 64, 35, 35}}, {{B, 64, 35, 35}}, {{B, 64, 35, 35}}});
  add("Concat 2x64x55x55", OpKind::kConcat, ir::AxisParams{1}, {{{B, 64, 55, 55}}, {{B, 64, 55, 55}}});
  add("Split qkv 197x2304", OpKind::kSplit, ir::SplitParams{2, {768, 768, 768}}, {{{B, 197, 2304}}});
  add("Slice class token 197x768", OpKind::kSlice, ir::SliceParams{{0}, {1}, {1}, {1}}, {{{B, 197, 768}}});
  add("Slice half 64x56x56", OpKind::kSlice, ir::SliceParams{{0}, {32}, {1}, {1}}, {{{B, 64, 56, 56}}});
  add("Pad 64x56x56", OpKind::kPad, ir::PadParams{{0, 0, 1, 1, 0, 0, 1, 1}, ir::PadMode::kConstant, 0.0}, {{{B, 64, 56, 56}}});
  add("Gather rows 128 of 30522x768", OpKind::kGather, ir::AxisParams{0},
      {{{30522, 768}, true}, {{B, 128}, false, ir::DType::kInt64}});
  add("Cast 128x768 to int64", OpKind::kCast, ir::CastParams{ir::DType::kInt64}, {{{B, 128, 768}}});
  // Views (no kernel; fitted separately as the view overhead).
  add("Reshape 128x768 -> 128x12x64", OpKind::kReshape, ir::ReshapeParams{{B, 128, 12, 64}}, {{{B, 128, 768}}});
  add("Flatten 2048x1x1", OpKind::kFlatten, ir::AxisParams{1}, {{{B, 2048, 1, 1}}});
  add("Unsqueeze 128", OpKind::kUnsqueeze, ir::AxesParams{{1}, true}, {{{B, 128}}});
  if (!failed.ok()) return failed.error();
  return ops;
}

CalibrationResult fit_profile(const DeviceProfile& base, std::vector<CalibrationSample> samples) {
  CalibrationResult r;
  r.profile = base;
  const AnalyticCostModel base_model(base);
  for (auto& s : samples) s.base_ms = base_model.cost_ms(s.work);
  // Zero-time samples (a view measured as 0) carry no relative information.
  std::vector<CalibrationSample> fit;
  for (const auto& s : samples)
    if (s.measured_ms > 0) fit.push_back(s);

  Theta best = theta_of(base);
  double best_obj = objective(best, fit);
  Theta cur = best;
  std::vector<bool> assign(fit.size(), false), prev;
  for (int it = 0; it < 50; ++it) {
    r.iterations = it + 1;
    for (size_t i = 0; i < fit.size(); ++i) {
      const auto& w = fit[i].work;
      assign[i] = w.bytes * cur[memory_param(w.memory)] >= w.flops * cur[compute_param(w.compute)];
    }
    if (assign == prev) break;
    prev = assign;
    cur = refit(cur, fit, assign);
    const double obj = objective(cur, fit);
    if (obj < best_obj) {
      best_obj = obj;
      best = cur;
    }
  }
  // The alternation can settle with a sample near its ridge (both bounds about equal) on the wrong
  // side. Flipping one sample at a time and keeping flips that lower the real (max) objective
  // fixes that; each try is one small least-squares solve.
  std::vector<bool> best_assign(fit.size());
  for (size_t i = 0; i < fit.size(); ++i) {
    const auto& w = fit[i].work;
    best_assign[i] = w.bytes * best[memory_param(w.memory)] >= w.flops * best[compute_param(w.compute)];
  }
  auto try_assignment = [&](const std::vector<bool>& trial) {
    const Theta t = refit(best, fit, trial);
    const double obj = objective(t, fit);
    if (!(obj < best_obj * (1 - 1e-9))) return false;
    best_obj = obj;
    best = t;
    best_assign = trial;
    return true;
  };
  for (int round = 0; round < 20; ++round) {
    bool improved = false;
    for (size_t i = 0; i < fit.size(); ++i) {
      if (fit[i].work.view) continue;
      auto trial = best_assign;
      trial[i] = !trial[i];
      improved = try_assignment(trial) || improved;
    }
    // A whole compute class at once: its samples may only fit together (one rate for all).
    for (int c = 0; c <= static_cast<int>(ComputeClass::kPool); ++c) {
      for (bool memory : {false, true}) {
        auto trial = best_assign;
        for (size_t i = 0; i < fit.size(); ++i)
          if (static_cast<int>(fit[i].work.compute) == c && fit[i].work.flops > 0) trial[i] = memory;
        if (trial != best_assign) improved = try_assignment(trial) || improved;
      }
    }
    r.iterations += 1;
    if (!improved) break;
  }
  // Four significant digits: finer than any measurement, and the written profile stays readable.
  auto round4 = [](double v) {
    if (!(v > 0) || !std::isfinite(v)) return v;
    const double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(v))));
    return std::round(v * scale) / scale;
  };
  auto set = [&](Throughput& t, double c) {
    if (c > 0 && std::isfinite(c)) t.efficiency = round4((1e-6 / c) / t.peak);
  };
  set(r.profile.conv, best[kConvP]);
  set(r.profile.matmul, best[kMatMulP]);
  set(r.profile.vector, best[kVectorP]);
  set(r.profile.special, best[kSpecialP]);
  set(r.profile.pool, best[kPoolP]);
  set(r.profile.stream, best[kStreamP]);
  set(r.profile.layout, best[kLayoutP]);
  r.profile.kernel_overhead_us = round4(best[kOverheadP] * 1e3);
  std::vector<double> views;
  for (const auto& s : samples)
    if (s.work.view) views.push_back(s.measured_ms);
  if (!views.empty()) r.profile.view_overhead_us = round4(median(views) * 1e3);

  const AnalyticCostModel fitted(r.profile);
  for (auto& s : samples) s.fitted_ms = fitted.cost_ms(s.work);
  // Relative errors over samples with a measurable time (views that measured 0 are exact anyway).
  std::vector<CalibrationSample> scored;
  for (const auto& s : samples)
    if (s.measured_ms > 0) scored.push_back(s);
  std::tie(r.median_rel_error, r.max_rel_error) = rel_errors(scored, true);
  std::tie(r.base_median_rel_error, r.base_max_rel_error) = rel_errors(scored, false);
  r.samples = std::move(samples);
  return r;
}

Expected<CalibrationResult> calibrate(CostModel& model, const DeviceProfile& base, int batch, const CostProgress& progress) {
  auto ops = calibration_ops(batch);
  if (!ops) return ops.error();
  std::vector<CalibrationSample> samples;
  for (size_t i = 0; i < ops->size(); ++i) {
    auto& [label, sig] = (*ops)[i];
    auto ms = model.op_cost(sig);
    if (!ms) return ms.error().with_context("calibration op " + label);
    samples.push_back({label, sig, op_work(sig), *ms});
    if (progress) progress(i + 1, ops->size());
  }
  auto r = fit_profile(base, std::move(samples));
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "efficiencies and overheads fitted by `rlflow cost calibrate --cost-model %s` to %zu ops (batch %d) on %s: "
                "relative error median %.1f%%, max %.1f%%",
                model.name().c_str(), r.samples.size(), batch, model.device_fingerprint().c_str(), 100 * r.median_rel_error,
                100 * r.max_rel_error);
  r.profile.calibration = buf;
  return r;
}

}  // namespace rlflow::cost
