// `rlflow cost` and `rlflow cost calibrate` as library calls, and their reports' text and JSON
// (include/rlflow/pipeline/cost.h).
#include "rlflow/util/clock.h"
#include "rlflow/pipeline/cost.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>

#include "rlflow/bench/ort_cost.h"
#include "rlflow/bench/runner.h"
#include "rlflow/bench/stats.h"
#include "rlflow/cost/analytic.h"
#include "rlflow/cost/cpu_backend.h"
#include "rlflow/cost/device.h"
#include "rlflow/ir/summary.h"
#include "rlflow/pipeline/setup.h"
#include "rlflow/util/file_io.h"

namespace rlflow::pipeline {

using json = nlohmann::json;

namespace {

std::string dims(const ir::Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out.empty() ? "scalar" : out;
}

std::string clip(std::string s, size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, n - 3) + "...";
}

// Node names are paths whose end says the most ("/layer3/layer3.0/conv1/Conv").
std::string clip_left(std::string s, size_t n) {
  if (s.size() <= n) return s;
  return "..." + s.substr(s.size() - (n - 3));
}

std::optional<cost::CacheStats> cache_stats(cost::CostModel& m) {
  if (auto* c = cost::as_cached(m)) return c->stats();
  return std::nullopt;
}

std::optional<cost::RecordedStats> recorded_stats(cost::CostModel& m) {
  if (auto* r = cost::as_recorded(m)) return r->stats();
  return std::nullopt;
}

json cache_json(const std::optional<cost::CacheStats>& s) {
  if (!s) return nullptr;
  json j{{"path", s->path}, {"hits", s->hits}, {"misses", s->misses}, {"entries", s->entries}, {"loaded", s->loaded}};
  if (!s->warning.empty()) j["warning"] = s->warning;
  return j;
}

void print_recorded(std::FILE* out, const std::optional<cost::RecordedStats>& st) {
  if (!st) return;
  std::fprintf(out, "  recorded: %lld lookups hit the table, %lld priced by profile %s (%zu entries, %s)\n", static_cast<long long>(st->hits),
               static_cast<long long>(st->misses), st->fallback.c_str(), st->entries, st->table.c_str());
}

// A measuring model's new timings are kept for the next run; a cache that cannot be written costs
// only that.
void save_cache(cost::CostModel& m) {
  if (auto* c = cost::as_cached(m)) {
    auto st = c->save();
    if (!st.ok()) spdlog::warn("cost cache not saved: {}", st.error().message);
  }
}

// The file run end to end in onnxruntime (1 thread, as the onnxruntime costs are timed): the
// reference executor's kernels are not what an onnxruntime cost model stands for.
Expected<cost::GraphMeasurement> measure_file_ort(const std::string& path, const ir::Graph& graph, const cost::MeasureOptions& mo) {
  bench::RunnerOptions ro;
  ro.target = "ort";
  ro.threads = 1;
  ro.seed = mo.seed;
  auto runner = bench::make_runner(ro);
  if (!runner) return runner.error();
  auto id = (*runner)->load({path, graph});
  if (!id) return id.error();
  std::vector<double> times;
  for (int i = 0; i < mo.warmup + mo.repeats; ++i) {
    auto ms = (*runner)->run(*id);
    if (!ms) return ms.error();
    if (i >= mo.warmup) times.push_back(*ms);
  }
  cost::GraphMeasurement m;
  m.ms = bench::median(times);
  m.runs = mo.repeats;
  m.method = (*runner)->description();
  return m;
}

// The whole graph run on the device the cost model stands for.
Expected<cost::GraphMeasurement> measure_graph(const ModelCostOptions& o, const ir::Graph& graph, cost::CostModel& cm) {
  const std::string backend = cm.name();
  bool gpu = backend == "cudnn";
  bool ort = backend == bench::kOrtMeasuredKind;
  if (backend == "analytic") {
    auto* a = dynamic_cast<cost::AnalyticCostModel*>(&cm);
    gpu = a && a->profile().device == "gpu" && cost::cudnn_backend_compiled() && cost::probe_devices().device_count > 0;
    ort = a && a->profile().runtime == "onnxruntime";
    if (a && a->profile().device == "gpu" && !gpu)
      spdlog::warn("profile {} models a GPU but none is usable: measuring on the CPU instead", a->profile().name);
  }
  cost::MeasureOptions mo;
  return ort ? measure_file_ort(o.model, graph, mo) : gpu ? cost::measure_graph_gpu(graph, mo, o.cost.gpu) : cost::measure_graph_cpu(graph, mo);
}

std::string today() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace

Expected<ModelCostReport> model_cost(const ModelCostOptions& o, const ModelCostHooks& hooks) {
  if (o.model.empty()) return Error{ErrorCode::kUsage, "cost: no model given"};
  ModelCostReport r;
  r.model = o.model;
  r.list_folded = o.list_folded;
  const auto t0 = std::chrono::steady_clock::now();
  // The one setup in two steps: the import is timed on its own (time_s.import), and a bad file is
  // reported before a timing backend starts.
  SetupOptions so;
  so.models = {o.model};
  so.input_shapes = o.input_shapes;
  auto in = setup(so);
  if (!in) return in.error();
  const ir::Graph& graph = in->models.front().graph;
  r.time.import = seconds_since(t0);
  so.models.clear();
  so.build_cost = true;
  so.cost = o.cost;
  auto built = setup(so);
  if (!built) return built.error();
  cost::CostModel& cm = *built->cost;
  r.cost_model = cm.name();
  r.fingerprint = cm.device_fingerprint();

  const auto tc = std::chrono::steady_clock::now();
  auto costs = cost::node_costs(graph, cm, r.cost_model != "analytic" ? hooks.costing : cost::CostProgress{});
  if (!costs) return costs.error();
  r.time.cost = seconds_since(tc);
  save_cache(cm);

  r.nodes = costs->size();
  for (const auto& c : *costs) {
    r.total_ms += c.ms;
    r.folded += c.folded;
    r.opaque += c.opaque;
  }
  const auto constant = ir::constant_nodes(graph);
  for (const auto& c : *costs) {
    const auto& n = graph.node(c.node);
    OpCostRow row;
    row.node = c.node;
    row.name = n.name;
    row.op = ir::op_display_name(n);
    if (!c.folded) {
      r.by_op[row.op].count++;
      r.by_op[row.op].ms += c.ms;
    }
    for (const auto& v : n.inputs) {
      row.inputs.push_back(graph.type(v).shape);
      row.input_constant.push_back(static_cast<bool>(constant[static_cast<size_t>(v.node)]));
    }
    for (const auto& t : n.outputs) row.outputs.push_back(t.shape);
    row.ms = c.ms;
    row.share = r.total_ms > 0 ? c.ms / r.total_ms : 0.0;
    row.folded = c.folded;
    row.opaque = c.opaque;
    row.fused = c.fused;
    r.rows.push_back(std::move(row));
  }

  if (o.measure_graph) {
    const auto tm = std::chrono::steady_clock::now();
    auto m = measure_graph(o, graph, cm);
    if (!m) return m.error().with_context("--measure-graph");
    r.time.measure = seconds_since(tm);
    r.measured = *m;
  }
  r.cache = cache_stats(cm);
  r.recorded = recorded_stats(cm);
  return r;
}

json ModelCostReport::to_json() const {
  json rows_json = json::array();
  for (const auto& row : rows) {
    json consts = json::array();
    for (bool c : row.input_constant) consts.push_back(c);
    rows_json.push_back({{"node", row.node}, {"name", row.name}, {"op", row.op}, {"inputs", row.inputs}, {"input_constant", consts},
                         {"outputs", row.outputs}, {"ms", row.ms}, {"share", row.share}, {"folded", row.folded}, {"opaque", row.opaque},
                         {"fused", row.fused}});
  }
  json agg = json::object();
  for (const auto& [k, v] : by_op) agg[k] = {{"count", v.count}, {"ms", v.ms}, {"share", total_ms > 0 ? v.ms / total_ms : 0.0}};
  json j{{"ok", true},
         {"model", model},
         {"cost_model", {{"kind", cost_model}, {"name", cost_model}, {"fingerprint", fingerprint}}},
         {"total_ms", total_ms},
         {"counts", {{"ops", nodes}, {"folded", folded}, {"opaque", opaque}}},
         {"ops", rows_json},
         {"by_op", agg},
         {"cache", cache_json(cache)},
         {"opaque_cost_ms", cost::kOpaqueCostMs},
         {"time_s", {{"import", time.import}, {"cost", time.cost}, {"measure", time.measure}}}};
  if (measured) {
    const auto& m = *measured;
    j["measure"] = {{"estimate_ms", total_ms}, {"measured_ms", m.ms}, {"ratio", m.ms > 0 ? total_ms / m.ms : 0.0}, {"method", m.method},
                    {"runs", m.runs}};
    if (m.skipped_opaque) j["measure"]["skipped_opaque"] = m.skipped_opaque;
  }
  if (recorded) {
    const auto& st = *recorded;
    j["recorded"] = {{"hits", st.hits}, {"misses", st.misses}, {"entries", st.entries}, {"table", st.table}, {"device", st.device},
                     {"fallback_profile", st.fallback}};
  }
  return j;
}

void ModelCostReport::print(std::FILE* out) const {
  std::fprintf(out, "%s  cost model: %s (%s)\n", model.c_str(), cost_model.c_str(), fingerprint.c_str());
  std::fprintf(out, "  %5s  %-24s %-18s %-44s %10s %7s\n", "node", "name", "op", "inputs (w: constant)", "ms", "share");
  for (const auto& row : rows) {
    if (row.folded && !list_folded) continue;
    std::string ins;
    for (size_t i = 0; i < row.inputs.size(); ++i) {
      if (i) ins += ' ';
      if (row.input_constant[i]) ins += "w:";
      ins += dims(row.inputs[i]);
    }
    const char* note = row.opaque ? "  fixed, cancels in comparisons"
                       : row.folded ? "  folded (constant inputs)"
                       : row.fused  ? "  fused into its producer by the runtime"
                                    : "";
    std::fprintf(out, "  %5d  %-24s %-18s %-44s %10.4f %6.2f%%%s\n", static_cast<int>(row.node), clip_left(row.name, 24).c_str(),
                 clip(row.op, 18).c_str(), clip(ins, 44).c_str(), row.ms, 100 * row.share, note);
  }
  std::fprintf(out, "  total %.4f ms over %zu ops", total_ms, nodes - static_cast<size_t>(folded));
  if (folded) std::fprintf(out, " (%d folded nodes cost nothing%s)", folded, list_folded ? "" : ", not listed; --all lists them");
  std::fprintf(out, "\n");
  if (opaque)
    std::fprintf(out, "  %d opaque ops at a fixed %.3g ms each: no rewrite touches them, so they cancel in every comparison\n", opaque,
                 cost::kOpaqueCostMs);
  std::vector<std::pair<std::string, OpTotal>> agg(by_op.begin(), by_op.end());
  std::sort(agg.begin(), agg.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::fprintf(out, "  by op:");
  for (size_t i = 0; i < agg.size(); ++i)
    std::fprintf(out, "%s %s x%d %.3f ms (%.1f%%)", i ? ";" : "", agg[i].first.c_str(), agg[i].second.count, agg[i].second.ms,
                 total_ms > 0 ? 100 * agg[i].second.ms / total_ms : 0.0);
  std::fprintf(out, "\n");
  print_recorded(out, recorded);
  if (cache)
    std::fprintf(out, "  cache: %lld hits, %lld misses, %zu entries for this device (%s)\n", static_cast<long long>(cache->hits),
                 static_cast<long long>(cache->misses), cache->entries, cache->path.c_str());
  if (measured)
    std::fprintf(out, "  whole graph: estimate %.3f ms, measured %.3f ms, estimate/measured %.3f  [%s]\n", total_ms, measured->ms,
                 measured->ms > 0 ? total_ms / measured->ms : 0.0, measured->method.c_str());
  std::fprintf(out, "  time: import %.2fs, cost %.2fs", time.import, time.cost);
  if (measured) std::fprintf(out, ", measure %.2fs", time.measure);
  std::fprintf(out, "\n");
}

Expected<CalibrateReport> calibrate_profile(const CalibrateOptions& o, const CalibrateHooks& hooks) {
  if (!o.profile_out.empty()) {
    // A profile is YAML: a path that names anything else (a model, most likely) is a slip, and
    // writing there would replace that file.
    const auto ext = std::filesystem::path(o.profile_out).extension().string();
    if (ext != ".yaml" && ext != ".yml")
      return Error{ErrorCode::kUsage, "--profile " + o.profile_out + ": a device profile is written as YAML (.yaml or .yml)"};
    RLFLOW_TRY_STATUS(check_output_path(o.profile_out, {o.base_profile, o.cost.cache_path}, "--profile"));
  }
  cost::CostOptions copts = o.cost;
  copts.deterministic = false;  // calibration times ops: the analytic model has nothing to fit
  auto kind = cost::resolve_kind(copts);
  if (!kind) return kind.error();
  // `ort` is the analytic onnxruntime profile here as everywhere: it is what calibration fits, not
  // something that can be timed.
  const cost::Backend* registered = cost::find_backend(*kind);
  if (*kind != "cpu" && *kind != "cudnn" && !(registered && registered->measures)) {
    std::string measuring = "auto, cpu, cudnn";
    for (const auto& k : cost::cost_model_kinds())
      if (const cost::Backend* b = cost::find_backend(k); b && b->measures) measuring += ", " + k;
    std::string msg = "calibrate needs a measuring backend (--cost-model " + measuring + "), not '" + o.cost.kind + "'";
    if (*kind == "ort")
      msg += std::string(": ort is the analytic onnxruntime profile; --cost-model ") + bench::kOrtMeasuredKind +
             " times each op in onnxruntime";
    return Error{ErrorCode::kUsage, msg};
  }
  const bool ort = *kind == bench::kOrtMeasuredKind;
  SetupOptions so;
  so.build_cost = true;
  so.cost = copts;
  auto built = setup(so);
  if (!built) return built.error();
  cost::CostModel& cm = *built->cost;
  CalibrateReport r;
  r.cost_model = cm.name();
  r.fingerprint = cm.device_fingerprint();
  const bool gpu = r.cost_model == "cudnn";
  r.base = !o.base_profile.empty() ? o.base_profile : gpu ? "h100" : "cpu-2core";
  auto base = cost::load_profile(r.base);
  if (!base) return base.error();
  r.batch = o.batch > 0 ? o.batch : gpu ? 8 : 1;

  const auto t0 = std::chrono::steady_clock::now();
  auto fitted = cost::calibrate(cm, *base, r.batch, hooks.timing);
  if (!fitted) return fitted.error();
  r.seconds = seconds_since(t0);
  save_cache(cm);
  r.result = std::move(*fitted);

  auto& p = r.result.profile;
  if (ort) {
    // The profile prices graphs as onnxruntime runs them, fusions included.
    p.runtime = "onnxruntime";
    p.description = "onnxruntime CPU execution provider (ORT_ENABLE_ALL, 1 thread) on " + cost::cpu_description();
  }
  if (!o.profile_out.empty()) {
    p.name = std::filesystem::path(o.profile_out).stem().string();
    p.calibration += " (" + today() + ")";
    RLFLOW_TRY_STATUS(cost::write_profile(p, o.profile_out));
    r.written = o.profile_out;
  }
  r.cache = cache_stats(cm);
  r.recorded = recorded_stats(cm);
  return r;
}

json CalibrateReport::to_json() const {
  const auto& p = result.profile;
  json samples = json::array();
  for (const auto& s : result.samples)
    samples.push_back({{"op", s.label}, {"measured_ms", s.measured_ms}, {"fitted_ms", s.fitted_ms}, {"base_ms", s.base_ms},
                       {"flops", s.work.flops}, {"bytes", s.work.bytes}});
  auto rate = [](const cost::Throughput& t) { return json{{"peak", t.peak}, {"efficiency", t.efficiency}, {"effective", t.effective()}}; };
  return json{{"ok", true},
              {"cost_model", {{"name", cost_model}, {"fingerprint", fingerprint}}},
              {"base", base},
              {"batch", batch},
              {"samples", samples},
              {"fit", {{"median_rel_error", result.median_rel_error}, {"max_rel_error", result.max_rel_error}, {"iterations", result.iterations}}},
              {"base_fit", {{"median_rel_error", result.base_median_rel_error}, {"max_rel_error", result.base_max_rel_error}}},
              {"profile",
               {{"compute_gflops", {{"conv", rate(p.conv)}, {"matmul", rate(p.matmul)}, {"vector", rate(p.vector)},
                                    {"special", rate(p.special)}, {"pool", rate(p.pool)}}},
                {"memory_gbs", {{"stream", rate(p.stream)}, {"layout", rate(p.layout)}}},
                {"overhead_us", {{"kernel", p.kernel_overhead_us}, {"view", p.view_overhead_us}}}}},
              {"written", written.empty() ? json(nullptr) : json(written)},
              {"cache", cache_json(cache)},
              {"time_s", seconds}};
}

void CalibrateReport::print(std::FILE* out) const {
  const auto& p = result.profile;
  std::fprintf(out, "calibration with %s (%s), batch %d, base profile %s\n", cost_model.c_str(), fingerprint.c_str(), batch, base.c_str());
  std::fprintf(out, "  %-36s %11s %11s %7s %11s %7s\n", "op", "measured ms", "base ms", "error", "fitted ms", "error");
  for (const auto& s : result.samples) {
    auto err = [&](double est) { return s.measured_ms > 0 ? 100 * (est - s.measured_ms) / s.measured_ms : 0.0; };
    std::fprintf(out, "  %-36s %11.4f %11.4f %6.0f%% %11.4f %6.0f%%\n", clip(s.label, 36).c_str(), s.measured_ms, s.base_ms,
                 err(s.base_ms), s.fitted_ms, err(s.fitted_ms));
  }
  std::fprintf(out, "  fit error (|fitted - measured| / measured): median %.1f%%, max %.1f%%  (base profile: median %.1f%%, max %.1f%%)\n",
               100 * result.median_rel_error, 100 * result.max_rel_error, 100 * result.base_median_rel_error,
               100 * result.base_max_rel_error);
  std::fprintf(out,
               "  fitted GFLOP/s: conv %.1f, matmul %.1f, vector %.1f, special %.2f, pool %.2f; GB/s: stream %.1f, layout %.1f; "
               "overhead: kernel %.2f us, view %.2f us\n",
               p.conv.effective(), p.matmul.effective(), p.vector.effective(), p.special.effective(), p.pool.effective(),
               p.stream.effective(), p.layout.effective(), p.kernel_overhead_us, p.view_overhead_us);
  if (!written.empty()) std::fprintf(out, "  wrote %s\n", written.c_str());
  else std::fprintf(out, "  (--profile FILE writes the fitted profile)\n");
  print_recorded(out, recorded);
  if (cache)
    std::fprintf(out, "  cache: %lld hits, %lld misses (%s)\n", static_cast<long long>(cache->hits), static_cast<long long>(cache->misses),
                 cache->path.c_str());
  std::fprintf(out, "  time: %.2fs\n", seconds);
}

}  // namespace rlflow::pipeline
