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

Expected<double> AnalyticCostModel::op_cost(const OpSignature& sig) {
  const auto cls = ir::op_info(sig.kind).cost;
  if (cls == ir::CostClass::kOpaque) return kOpaqueCostMs;
  if (cls == ir::CostClass::kFree) return 0.0;
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
