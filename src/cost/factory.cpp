#include "rlflow/cost/factory.h"

#include <spdlog/spdlog.h>

#include "rlflow/cost/analytic.h"
#include "rlflow/cost/cache.h"
#include "rlflow/cost/device.h"
#include "rlflow/cost/recorded.h"

namespace rlflow::cost {

namespace {

bool gpu_usable() { return cudnn_backend_compiled() && probe_devices().device_count > 0; }

std::unique_ptr<CostModel> cached(std::unique_ptr<CostModel> m, const CostOptions& o) {
  if (!o.use_cache) return m;
  return std::make_unique<CachedCostModel>(std::move(m), o.cache_path.empty() ? default_cache_path() : o.cache_path);
}

}  // namespace

std::string default_profile_name() { return gpu_usable() ? "h100" : "cpu-2core"; }

Expected<std::string> resolve_kind(const CostOptions& o) {
  if (o.kind == "recorded" || o.kind == "ort") return o.kind;  // deterministic already
  if (o.deterministic || o.kind == "analytic") return std::string("analytic");
  if (o.kind == "cpu" || o.kind == "cudnn") return o.kind;
  if (o.kind == "auto" || o.kind.empty()) return std::string(gpu_usable() ? "cudnn" : "cpu");
  return Error{ErrorCode::kUsage, "unknown cost model '" + o.kind + "' (expected auto, cudnn, cpu, analytic, recorded or ort)"};
}

Expected<std::unique_ptr<CostModel>> make_cost_model(const CostOptions& o) {
  auto kind = resolve_kind(o);
  if (!kind) return kind.error();
  if (*kind == "recorded") {
    auto table = read_cost_table(o.cost_table.empty() ? default_cost_table() : o.cost_table);
    if (!table) return table.error();
    auto p = load_profile(o.device_profile.empty() ? "h100" : o.device_profile);
    if (!p) return p.error();
    return std::unique_ptr<CostModel>(std::make_unique<RecordedCostModel>(
        std::move(*table), o.cost_table.empty() ? default_cost_table() : o.cost_table, std::move(*p)));
  }
  if (*kind == "analytic" || *kind == "ort") {
    auto p = load_profile(!o.device_profile.empty() ? o.device_profile : *kind == "ort" ? kOrtProfile : default_profile_name());
    if (!p) return p.error();
    return std::unique_ptr<CostModel>(std::make_unique<AnalyticCostModel>(std::move(*p)));
  }
  if (*kind == "cudnn") {
    auto m = make_cudnn_cost_model(o.gpu);
    if (m) return cached(std::move(*m), o);
    // `auto` promised a working default: fall back to the CPU rather than fail.
    if (o.kind != "auto" && !o.kind.empty()) return m.error();
    spdlog::warn("cost model: {}; using the cpu backend", m.error().message);
  }
  return cached(make_cpu_cost_model(o.cpu), o);
}

}  // namespace rlflow::cost
