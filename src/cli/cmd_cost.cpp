// `rlflow cost MODEL` and `rlflow cost calibrate`: their flags, bound to the library's options
// (include/rlflow/pipeline/cost.h), a progress line on a terminal, the report on stdout, and the
// error as an exit code.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "flags.h"
#include "rlflow/cli/app.h"
#include "rlflow/cost/factory.h"

namespace rlflow::cli {

namespace {

// "\r[cost] measuring 12/120" on a terminal, nothing otherwise.
cost::CostProgress progress_line(const char* what, bool enabled) {
  if (!enabled || !::isatty(STDERR_FILENO)) return {};
  return [what](size_t done, size_t total) {
    std::fprintf(stderr, "\r[cost] %s %zu/%zu", what, done, total);
    if (done == total) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  };
}

// Both subcommands' options. calibrate's cost flags are the parent's as well (`rlflow cost --cache F
// calibrate` works), so both bind to `table.cost`, which calibrate takes when it runs.
struct CostCommand {
  pipeline::ModelCostOptions table;
  pipeline::CalibrateOptions calibrate;
};

}  // namespace

int cmd_cost(const GlobalOptions& g, const pipeline::ModelCostOptions& o) {
  if (o.model.empty()) return report_error(g, Error{ErrorCode::kUsage, "cost: a MODEL (or the subcommand calibrate) is required"});
  return print_report(g, pipeline::model_cost(o, {progress_line("costing ops", !g.json)}));
}

int cmd_cost_calibrate(const GlobalOptions& g, const pipeline::CalibrateOptions& o) {
  return print_report(g, pipeline::calibrate_profile(o, {progress_line("timing calibration ops", !g.json)}));
}

void declare_cost(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto o = std::make_shared<CostCommand>();
  auto& t = o->table;
  auto* c_cost = app.add_subcommand("cost", "Per-op cost table and total of a model; `cost calibrate` fits a device profile");
  c_cost->require_subcommand(0, 1);
  c_cost->add_option("model", t.model, "ONNX model");
  c_cost->add_option("--cost-model", t.cost.kind, cost::cost_model_help())->check(CLI::IsMember(cost::cost_model_kinds()))->capture_default_str();
  c_cost->add_flag("--deterministic", t.cost.deterministic,
                   "Exactly reproducible: a measured cost model (cpu, cudnn, auto, ort-measured) gives way to the analytic one (recorded and ort "
                   "are deterministic already)");
  c_cost->add_option("--device-profile", t.cost.device_profile, "Analytic device profile: h100, h200, cpu-2core or a YAML path");
  c_cost->add_option("--cost-table", t.cost.cost_table, "recorded: table of measured op timings (default configs/devices/h100-cost-table.json)");
  c_cost->add_flag("--measure-graph", t.measure_graph,
                   "Also run the whole graph on the device the cost model stands for (onnxruntime for ort and ort-measured) and compare with "
                   "the sum of op costs");
  c_cost->add_option("--input-shape", t.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_cost->add_flag("--all", t.list_folded, "List folded nodes (constant inputs, cost 0) too");
  c_cost->add_option("--cache", t.cost.cache_path, "Cost cache file (default ~/.cache/rlflow/cost-cache.json or $RLFLOW_COST_CACHE)");
  const auto no_cache = [o] { o->table.cost.use_cache = false; };
  c_cost->add_flag_callback("--no-cache", no_cache, "Measure every op; neither read nor write the cache");
  c_cost->add_option("--warmup", t.cost.warmup, "Untimed runs per op (default: cpu 3, cudnn 8, ort-measured 3)")->check(kNonNegative);
  c_cost->add_option("--repeats", t.cost.repeats, "Timed runs per op, median (default: cpu 10, cudnn 32, ort-measured 15)")->check(kAtLeastOne);
  c_cost->add_flag("--json", g.json, "Print one JSON document");

  auto& c = o->calibrate;
  auto* c_calib = c_cost->add_subcommand("calibrate", "Time representative ops and fit an analytic device profile to them");
  // Every kind parses, so that a non-measuring one (ort above all) gets calibrate's own message.
  c_calib->add_option("--cost-model", t.cost.kind,
                      "The measuring backend: auto, cpu, cudnn, or ort-measured (each op as a one-node model in onnxruntime); "
                      "ort, the analytic onnxruntime profile, is what ort-measured's timings fit and cannot itself calibrate")
      ->check(CLI::IsMember(cost::cost_model_kinds()))
      ->capture_default_str();
  c_calib->add_option("--profile", c.profile_out, "Write the fitted profile to this YAML file");
  c_calib->add_option("--base", c.base_profile, "Profile whose peaks are kept (default: cpu-2core for cpu, h100 for cudnn)");
  c_calib->add_option("--batch", c.batch, "Batch size of the CNN calibration ops (default: 1 for cpu, 8 for cudnn)")->check(kAtLeastOne);
  c_calib->add_option("--cache", t.cost.cache_path, "Cost cache file");
  c_calib->add_flag_callback("--no-cache", no_cache, "Measure every op; neither read nor write the cache");
  c_calib->add_option("--warmup", t.cost.warmup, "Untimed runs per op")->check(kNonNegative);
  c_calib->add_option("--repeats", t.cost.repeats, "Timed runs per op, median")->check(kAtLeastOne);
  c_calib->add_flag("--json", g.json, "Print one JSON document");

  out.push_back({c_calib, [&g, o] {
                   o->calibrate.cost = o->table.cost;
                   return cmd_cost_calibrate(g, o->calibrate);
                 }});
  out.push_back({c_cost, [&g, o] { return cmd_cost(g, o->table); }});
}

}  // namespace rlflow::cli
