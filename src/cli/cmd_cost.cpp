// `rlflow cost MODEL`: the per-op cost table and total under a cost model, optionally checked
// against a whole-graph run; `rlflow cost calibrate`: fits an analytic device profile.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>

#include "commands.h"
#include "rlflow/bench/ort_cost.h"
#include "rlflow/bench/runner.h"
#include "rlflow/bench/stats.h"
#include "rlflow/cli/app.h"
#include "rlflow/cost/cpu_backend.h"
#include "rlflow/cost/analytic.h"
#include "rlflow/cost/cache.h"
#include "rlflow/util/file_io.h"
#include "rlflow/cost/calibrate.h"
#include "rlflow/cost/device.h"
#include "rlflow/cost/factory.h"
#include "rlflow/cost/measure.h"
#include "rlflow/cost/recorded.h"
#include "rlflow/exec/executor.h"
#include "rlflow/ir/summary.h"
#include "rlflow/onnx/model_io.h"

namespace rlflow::cli {

using json = nlohmann::json;

namespace {

cost::CostOptions cost_options(const CostCmdOptions& o) {
  cost::CostOptions c;
  c.kind = o.cost_model;
  c.deterministic = o.deterministic;
  c.device_profile = o.device_profile;
  c.cost_table = o.cost_table;
  c.cache_path = o.cache;
  c.use_cache = !o.no_cache;
  c.warmup = o.warmup;
  c.repeats = o.repeats;
  return c;
}

// "\r[cost] measuring 12/120" on a terminal, nothing otherwise.
cost::CostProgress progress_line(const char* what, bool enabled) {
  if (!enabled || !::isatty(STDERR_FILENO)) return {};
  return [what](size_t done, size_t total) {
    std::fprintf(stderr, "\r[cost] %s %zu/%zu", what, done, total);
    if (done == total) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  };
}

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

json cache_json(cost::CostModel& m) {
  auto* c = cost::as_cached(m);
  if (!c) return nullptr;
  const auto s = c->stats();
  json j{{"path", s.path}, {"hits", s.hits}, {"misses", s.misses}, {"entries", s.entries}, {"loaded", s.loaded}};
  if (!s.warning.empty()) j["warning"] = s.warning;
  return j;
}

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

std::string today() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace

int cmd_cost(const GlobalOptions& g, const CostCmdOptions& o) {
  if (o.model.empty()) return report_error(g, Error{ErrorCode::kUsage, "cost: a MODEL (or the subcommand calibrate) is required"});
  const auto t0 = std::chrono::steady_clock::now();
  exec::Executor ex;
  auto graph = load_model(o.model, o.input_shapes, ex);
  if (!graph) return report_error(g, graph.error());
  const double t_import = seconds_since(t0);

  const auto copts = cost_options(o);
  auto model = cost::make_cost_model(copts);
  if (!model) return report_error(g, model.error());
  cost::CostModel& cm = **model;
  // What actually runs: `auto` may have fallen back from cudnn to cpu.
  const std::string backend = cm.name();

  const auto tc = std::chrono::steady_clock::now();
  auto costs = cost::node_costs(*graph, cm, progress_line("costing ops", !g.json && backend != "analytic"));
  if (!costs) return report_error(g, costs.error());
  const double t_cost = seconds_since(tc);
  save_cache(cm);

  double total = 0;
  int folded = 0, opaque = 0;
  for (const auto& c : *costs) {
    total += c.ms;
    folded += c.folded;
    opaque += c.opaque;
  }
  struct Agg {
    int count = 0;
    double ms = 0;
  };
  std::map<std::string, Agg> by_op;
  const auto constant = ir::constant_nodes(*graph);
  json rows = json::array();
  for (const auto& c : *costs) {
    const auto& n = graph->node(c.node);
    const std::string op = ir::op_display_name(n);
    if (!c.folded) {
      by_op[op].count++;
      by_op[op].ms += c.ms;
    }
    json ins = json::array(), consts = json::array(), outs = json::array();
    for (const auto& in : n.inputs) {
      ins.push_back(graph->type(in).shape);
      consts.push_back(static_cast<bool>(constant[static_cast<size_t>(in.node)]));
    }
    for (const auto& t : n.outputs) outs.push_back(t.shape);
    rows.push_back({{"node", c.node}, {"name", n.name}, {"op", op}, {"inputs", ins}, {"input_constant", consts}, {"outputs", outs},
                    {"ms", c.ms}, {"share", total > 0 ? c.ms / total : 0.0}, {"folded", c.folded}, {"opaque", c.opaque},
                    {"fused", c.fused}});
  }

  // The whole-graph run uses the device the cost model stands for.
  json measure = nullptr;
  double t_measure = 0;
  if (o.measure_graph) {
    bool gpu = backend == "cudnn";
    bool ort = backend == bench::kOrtMeasuredKind;
    if (backend == "analytic") {
      auto* a = dynamic_cast<cost::AnalyticCostModel*>(&cm);
      gpu = a && a->profile().device == "gpu" && cost::cudnn_backend_compiled() && cost::probe_devices().device_count > 0;
      ort = a && a->profile().runtime == "onnxruntime";
      if (a && a->profile().device == "gpu" && !gpu)
        spdlog::warn("profile {} models a GPU but none is usable: measuring on the CPU instead", a->profile().name);
    }
    const auto tm = std::chrono::steady_clock::now();
    cost::MeasureOptions mo;
    auto m = ort ? measure_file_ort(o.model, *graph, mo)
             : gpu ? cost::measure_graph_gpu(*graph, mo, copts.gpu)
                   : cost::measure_graph_cpu(*graph, mo);
    if (!m) return report_error(g, m.error().with_context("--measure-graph"));
    t_measure = seconds_since(tm);
    measure = {{"estimate_ms", total}, {"measured_ms", m->ms}, {"ratio", m->ms > 0 ? total / m->ms : 0.0}, {"method", m->method},
               {"runs", m->runs}};
    if (m->skipped_opaque) measure["skipped_opaque"] = m->skipped_opaque;
  }

  if (g.json) {
    json agg = json::object();
    for (const auto& [k, v] : by_op) agg[k] = {{"count", v.count}, {"ms", v.ms}, {"share", total > 0 ? v.ms / total : 0.0}};
    json j{{"ok", true},
           {"model", o.model},
           {"cost_model", {{"kind", backend}, {"name", cm.name()}, {"fingerprint", cm.device_fingerprint()}}},
           {"total_ms", total},
           {"counts", {{"ops", costs->size()}, {"folded", folded}, {"opaque", opaque}}},
           {"ops", rows},
           {"by_op", agg},
           {"cache", cache_json(cm)},
           {"opaque_cost_ms", cost::kOpaqueCostMs},
           {"time_s", {{"import", t_import}, {"cost", t_cost}, {"measure", t_measure}}}};
    if (o.measure_graph) j["measure"] = measure;
    if (auto* rec = cost::as_recorded(cm)) {
      const auto st = rec->stats();
      j["recorded"] = {{"hits", st.hits}, {"misses", st.misses}, {"entries", st.entries}, {"table", st.table}, {"device", st.device},
                       {"fallback_profile", st.fallback}};
    }
    std::cout << json_text(j) << std::endl;
    return kOk;
  }

  std::printf("%s  cost model: %s (%s)\n", o.model.c_str(), cm.name().c_str(), cm.device_fingerprint().c_str());
  std::printf("  %5s  %-24s %-18s %-44s %10s %7s\n", "node", "name", "op", "inputs (w: constant)", "ms", "share");
  for (const auto& r : rows) {
    const bool is_folded = r["folded"].get<bool>();
    if (is_folded && !o.all) continue;
    std::string ins;
    for (size_t i = 0; i < r["inputs"].size(); ++i) {
      if (i) ins += ' ';
      if (r["input_constant"][i].get<bool>()) ins += "w:";
      ins += dims(r["inputs"][i].get<ir::Shape>());
    }
    const char* note = r["opaque"].get<bool>() ? "  fixed, cancels in comparisons"
                       : is_folded            ? "  folded (constant inputs)"
                       : r["fused"].get<bool>() ? "  fused into its producer by the runtime"
                                              : "";
    std::printf("  %5d  %-24s %-18s %-44s %10.4f %6.2f%%%s\n", r["node"].get<int>(), clip_left(r["name"].get<std::string>(), 24).c_str(),
                clip(r["op"].get<std::string>(), 18).c_str(), clip(ins, 44).c_str(), r["ms"].get<double>(),
                100 * r["share"].get<double>(), note);
  }
  std::printf("  total %.4f ms over %zu ops", total, costs->size() - static_cast<size_t>(folded));
  if (folded) std::printf(" (%d folded nodes cost nothing%s)", folded, o.all ? "" : ", not listed; --all lists them");
  std::printf("\n");
  if (opaque)
    std::printf("  %d opaque ops at a fixed %.3g ms each: no rewrite touches them, so they cancel in every comparison\n", opaque,
                cost::kOpaqueCostMs);
  std::vector<std::pair<std::string, Agg>> agg(by_op.begin(), by_op.end());
  std::sort(agg.begin(), agg.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::printf("  by op:");
  for (size_t i = 0; i < agg.size(); ++i)
    std::printf("%s %s x%d %.3f ms (%.1f%%)", i ? ";" : "", agg[i].first.c_str(), agg[i].second.count, agg[i].second.ms,
                total > 0 ? 100 * agg[i].second.ms / total : 0.0);
  std::printf("\n");
  if (auto* rec = cost::as_recorded(cm)) {
    const auto st = rec->stats();
    std::printf("  recorded: %lld lookups hit the table, %lld priced by profile %s (%zu entries, %s)\n", static_cast<long long>(st.hits),
                static_cast<long long>(st.misses), st.fallback.c_str(), st.entries, st.table.c_str());
  }
  if (auto c = cache_json(cm); !c.is_null())
    std::printf("  cache: %lld hits, %lld misses, %zu entries for this device (%s)\n", c["hits"].get<long long>(),
                c["misses"].get<long long>(), c["entries"].get<size_t>(), c["path"].get<std::string>().c_str());
  if (o.measure_graph)
    std::printf("  whole graph: estimate %.3f ms, measured %.3f ms, estimate/measured %.3f  [%s]\n", total,
                measure["measured_ms"].get<double>(), measure["ratio"].get<double>(), measure["method"].get<std::string>().c_str());
  std::printf("  time: import %.2fs, cost %.2fs", t_import, t_cost);
  if (o.measure_graph) std::printf(", measure %.2fs", t_measure);
  std::printf("\n");
  return kOk;
}

int cmd_cost_calibrate(const GlobalOptions& g, const CostCmdOptions& o) {
  if (!o.profile_out.empty())
    if (auto st = check_output_path(o.profile_out, {o.base_profile, o.cache}, "--profile"); !st.ok()) return report_error(g, st.error());
  auto copts = cost_options(o);
  copts.deterministic = false;
  auto kind = cost::resolve_kind(copts);
  if (!kind) return report_error(g, kind.error());
  // `ort` is the analytic onnxruntime profile here as everywhere: it is what calibration fits, not
  // something that can be timed.
  const cost::Backend* registered = cost::find_backend(*kind);
  if (*kind != "cpu" && *kind != "cudnn" && !(registered && registered->measures)) {
    std::string measuring = "auto, cpu, cudnn";
    for (const auto& k : cost::cost_model_kinds())
      if (const cost::Backend* b = cost::find_backend(k); b && b->measures) measuring += ", " + k;
    std::string msg = "calibrate needs a measuring backend (--cost-model " + measuring + "), not '" + o.cost_model + "'";
    if (*kind == "ort")
      msg += std::string(": ort is the analytic onnxruntime profile; --cost-model ") + bench::kOrtMeasuredKind +
             " times each op in onnxruntime";
    return report_error(g, Error{ErrorCode::kUsage, msg});
  }
  const bool ort = *kind == bench::kOrtMeasuredKind;
  auto model = cost::make_cost_model(copts);
  if (!model) return report_error(g, model.error());
  cost::CostModel& cm = **model;
  const bool gpu = cm.name() == "cudnn";
  const std::string base_name = !o.base_profile.empty() ? o.base_profile : gpu ? "h100" : "cpu-2core";
  auto base = cost::load_profile(base_name);
  if (!base) return report_error(g, base.error());
  const int batch = o.batch > 0 ? o.batch : gpu ? 8 : 1;

  const auto t0 = std::chrono::steady_clock::now();
  auto r = cost::calibrate(cm, *base, batch, progress_line("timing calibration ops", !g.json));
  if (!r) return report_error(g, r.error());
  const double t_cal = seconds_since(t0);
  save_cache(cm);

  auto& p = r->profile;
  if (ort) {
    // The profile prices graphs as onnxruntime runs them, fusions included.
    p.runtime = "onnxruntime";
    p.description = "onnxruntime CPU execution provider (ORT_ENABLE_ALL, 1 thread) on " + cost::cpu_description();
  }
  if (!o.profile_out.empty()) {
    p.name = std::filesystem::path(o.profile_out).stem().string();
    p.calibration += " (" + today() + ")";
    auto st = cost::write_profile(p, o.profile_out);
    if (!st.ok()) return report_error(g, st.error());
  }
  if (g.json) {
    json samples = json::array();
    for (const auto& s : r->samples)
      samples.push_back({{"op", s.label}, {"measured_ms", s.measured_ms}, {"fitted_ms", s.fitted_ms}, {"base_ms", s.base_ms},
                         {"flops", s.work.flops}, {"bytes", s.work.bytes}});
    auto rate = [](const cost::Throughput& t) { return json{{"peak", t.peak}, {"efficiency", t.efficiency}, {"effective", t.effective()}}; };
    json j{{"ok", true},
           {"cost_model", {{"name", cm.name()}, {"fingerprint", cm.device_fingerprint()}}},
           {"base", base_name},
           {"batch", batch},
           {"samples", samples},
           {"fit", {{"median_rel_error", r->median_rel_error}, {"max_rel_error", r->max_rel_error}, {"iterations", r->iterations}}},
           {"base_fit", {{"median_rel_error", r->base_median_rel_error}, {"max_rel_error", r->base_max_rel_error}}},
           {"profile",
            {{"compute_gflops", {{"conv", rate(p.conv)}, {"matmul", rate(p.matmul)}, {"vector", rate(p.vector)},
                                 {"special", rate(p.special)}, {"pool", rate(p.pool)}}},
             {"memory_gbs", {{"stream", rate(p.stream)}, {"layout", rate(p.layout)}}},
             {"overhead_us", {{"kernel", p.kernel_overhead_us}, {"view", p.view_overhead_us}}}}},
           {"written", o.profile_out.empty() ? json(nullptr) : json(o.profile_out)},
           {"cache", cache_json(cm)},
           {"time_s", t_cal}};
    std::cout << json_text(j) << std::endl;
    return kOk;
  }
  std::printf("calibration with %s (%s), batch %d, base profile %s\n", cm.name().c_str(), cm.device_fingerprint().c_str(), batch,
              base_name.c_str());
  std::printf("  %-36s %11s %11s %7s %11s %7s\n", "op", "measured ms", "base ms", "error", "fitted ms", "error");
  for (const auto& s : r->samples) {
    auto err = [&](double est) { return s.measured_ms > 0 ? 100 * (est - s.measured_ms) / s.measured_ms : 0.0; };
    std::printf("  %-36s %11.4f %11.4f %6.0f%% %11.4f %6.0f%%\n", clip(s.label, 36).c_str(), s.measured_ms, s.base_ms,
                err(s.base_ms), s.fitted_ms, err(s.fitted_ms));
  }
  std::printf("  fit error (|fitted - measured| / measured): median %.1f%%, max %.1f%%  (base profile: median %.1f%%, max %.1f%%)\n",
              100 * r->median_rel_error, 100 * r->max_rel_error, 100 * r->base_median_rel_error, 100 * r->base_max_rel_error);
  std::printf("  fitted GFLOP/s: conv %.1f, matmul %.1f, vector %.1f, special %.2f, pool %.2f; GB/s: stream %.1f, layout %.1f; "
              "overhead: kernel %.2f us, view %.2f us\n",
              p.conv.effective(), p.matmul.effective(), p.vector.effective(), p.special.effective(), p.pool.effective(),
              p.stream.effective(), p.layout.effective(),
              p.kernel_overhead_us, p.view_overhead_us);
  if (!o.profile_out.empty()) std::printf("  wrote %s\n", o.profile_out.c_str());
  else std::printf("  (--profile FILE writes the fitted profile)\n");
  if (auto* rec = cost::as_recorded(cm)) {
    const auto st = rec->stats();
    std::printf("  recorded: %lld lookups hit the table, %lld priced by profile %s (%zu entries, %s)\n", static_cast<long long>(st.hits),
                static_cast<long long>(st.misses), st.fallback.c_str(), st.entries, st.table.c_str());
  }
  if (auto c = cache_json(cm); !c.is_null())
    std::printf("  cache: %lld hits, %lld misses (%s)\n", c["hits"].get<long long>(), c["misses"].get<long long>(),
                c["path"].get<std::string>().c_str());
  std::printf("  time: %.2fs\n", t_cal);
  return kOk;
}

}  // namespace rlflow::cli
