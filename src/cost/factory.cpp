#include "rlflow/cost/factory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <mutex>

#include "rlflow/cost/analytic.h"
#include "rlflow/cost/cache.h"
#include "rlflow/cost/device.h"
#include "rlflow/cost/recorded.h"

namespace rlflow::cost {

namespace {

bool gpu_usable() { return cudnn_backend_compiled() && probe_devices().device_count > 0; }

// What each built-in kind means, in the order --help lists them.
const std::vector<std::pair<std::string, std::string>>& builtin_kinds() {
  static const std::vector<std::pair<std::string, std::string>> k{
      {"auto", "cudnn with a GPU, else cpu"},
      {"cudnn", "cuDNN/cuBLAS kernels timed on this GPU"},
      {"cpu", "rlflow's CPU kernels timed here"},
      {"analytic", "roofline over a device profile"},
      {"recorded", "replayed H100 timings, --cost-table"},
      {"ort", "analytic onnxruntime CPU profile"}};
  return k;
}

bool is_builtin(const std::string& name) {
  const auto& k = builtin_kinds();
  return std::any_of(k.begin(), k.end(), [&](const auto& e) { return e.first == name; });
}

// A deque keeps the address find_backend hands out valid while later backends register.
struct Registry {
  std::mutex mu;
  std::deque<Backend> backends;
};
Registry& registry() {
  static Registry r;
  return r;
}

std::string known_kinds_text() {
  const auto k = cost_model_kinds();
  std::string out;
  for (size_t i = 0; i < k.size(); ++i) out += (i == 0 ? "" : i + 1 == k.size() ? " or " : ", ") + k[i];
  return out;
}

std::unique_ptr<CostModel> cached(std::unique_ptr<CostModel> m, const CostOptions& o) {
  if (!o.use_cache) return m;
  return std::make_unique<CachedCostModel>(std::move(m), o.cache_path.empty() ? default_cache_path() : o.cache_path);
}

}  // namespace

std::string default_profile_name() { return gpu_usable() ? "h100" : "cpu-2core"; }

Status register_backend(Backend b) {
  if (b.name.empty() || !b.make) return Error::internal("register_backend: a backend needs a name and a maker");
  if (is_builtin(b.name)) return Error::internal("register_backend: '" + b.name + "' is a built-in cost model");
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& e : r.backends)
    if (e.name == b.name) {
      e = std::move(b);
      return {};
    }
  r.backends.push_back(std::move(b));
  return {};
}

const Backend* find_backend(const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& e : r.backends)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> cost_model_kinds() {
  std::vector<std::string> k;
  for (const auto& [name, what] : builtin_kinds()) k.push_back(name);
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& e : r.backends) k.push_back(e.name);
  return k;
}

std::string cost_model_help(const std::string& auto_means) {
  std::vector<std::pair<std::string, std::string>> all = builtin_kinds();
  if (!auto_means.empty()) all.front().second = auto_means;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& e : r.backends) all.emplace_back(e.name, e.description);
  }
  std::string out;
  for (size_t i = 0; i < all.size(); ++i) {
    out += i == 0 ? "" : i + 1 == all.size() ? " or " : ", ";
    out += all[i].first + (all[i].second.empty() ? "" : " (" + all[i].second + ")");
  }
  return out;
}

Expected<std::string> resolve_kind(const CostOptions& o) {
  if (o.kind == "recorded" || o.kind == "ort") return o.kind;  // deterministic already
  if (o.kind == "analytic") return std::string("analytic");
  if (const Backend* b = find_backend(o.kind)) return o.deterministic && b->measures ? std::string("analytic") : o.kind;
  if (o.kind == "cpu" || o.kind == "cudnn" || o.kind == "auto" || o.kind.empty()) {
    if (o.deterministic) return std::string("analytic");
    if (o.kind == "cpu" || o.kind == "cudnn") return o.kind;
    return std::string(gpu_usable() ? "cudnn" : "cpu");
  }
  return Error{ErrorCode::kUsage, "unknown cost model '" + o.kind + "' (expected " + known_kinds_text() + ")"};
}

Expected<std::unique_ptr<CostModel>> make_cost_model(const CostOptions& opts) {
  auto kind = resolve_kind(opts);
  if (!kind) return kind.error();
  CostOptions o = opts;
  if (o.warmup >= 0) o.cpu.warmup = o.gpu.warmup = o.warmup;
  if (o.repeats > 0) o.cpu.repeats = o.gpu.repeats = o.repeats;
  if (const Backend* b = find_backend(*kind)) return b->make(o);
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
