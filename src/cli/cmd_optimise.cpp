// `rlflow optimise`: its flags, bound to the pipeline's options (include/rlflow/pipeline/optimise.h),
// a progress line on a terminal, the report on stdout, and the error as an exit code.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>

#include "commands.h"
#include "flags.h"
#include "progress.h"
#include "rlflow/cli/app.h"
#include "rlflow/pipeline/bench.h"
#include "rlflow/cost/factory.h"
#include "rlflow/ir/composites.h"
#include "rlflow/search/registry.h"

namespace rlflow::cli {

namespace {

using Clock = std::chrono::steady_clock;

// What the line knows of the search: its last report, and what it was told of the limits.
struct SearchView {
  bool rl = false;            // the budget counts agent actions (search::Strategy::budget_counts_actions)
  bool none = false;         // --search none: no search reports come
  int64_t budget = 0;        // Limits::budget (<= 0: none)
  double time_limit_s = 0;   // Limits::time_limit_s as the pipeline sets it (0: none)
  bool seen = false;         // a report has come
  search::Report report;
  double best = 0;
  Clock::time_point at;      // when the last report came
  std::string stage;         // after the search: what the pipeline is doing (OptimiseHooks::stage)
  Clock::time_point stage_at;
};

std::string search_line(const SearchView& v, double elapsed) {  // elapsed: since the command began
  char buf[320];
  if (!v.seen) {
    std::snprintf(buf, sizeof buf, "[optimise] %s | %s", v.none ? "importing, checking and writing" : "importing, fusing and preparing the search",
                  format_duration(elapsed).c_str());
    return buf;
  }
  if (!v.stage.empty()) {
    const double in_stage = std::chrono::duration<double>(Clock::now() - v.stage_at).count();
    std::snprintf(buf, sizeof buf, "[optimise] %s | %s", v.stage.c_str(), format_duration(in_stage).c_str());
    return buf;
  }
  const auto& r = v.report;
  const double since_report = std::chrono::duration<double>(Clock::now() - v.at).count();
  const double searched = r.seconds_total + since_report;  // the search's own clock, moved on
  const int64_t used = std::max(r.budget_used, v.rl ? r.agent_actions : r.expanded);
  // Past a limit the search stops (at its next check); the pipeline then checks the candidates
  // (write, re-import, verify, measure), which reports nothing until it is done.
  const bool budget_spent = v.budget > 0 && used >= v.budget;
  const bool time_spent = v.time_limit_s > 0 && searched > v.time_limit_s + 0.5;
  if (budget_spent || time_spent) {
    const double checking = budget_spent ? since_report : searched - v.time_limit_s;
    std::snprintf(buf, sizeof buf, "[optimise] search done (%s; %lld graphs, best %.4g ms) | checking candidates %s",
                  budget_spent ? "budget" : "time limit", static_cast<long long>(r.expanded), v.best, format_duration(checking).c_str());
    return buf;
  }
  // Time left: the time limit bounds it; the budget, at the rate so far, estimates it.
  double left = std::numeric_limits<double>::infinity();
  bool bounded = false;
  if (v.time_limit_s > 0) {
    left = v.time_limit_s - searched;
    bounded = true;
  }
  if (v.budget > 0 && used > 0 && r.seconds_total > 0) {
    const double by_budget = static_cast<double>(v.budget - used) * r.seconds_total / static_cast<double>(used) - since_report;
    if (by_budget < left) {
      left = by_budget;
      bounded = false;
    }
  }
  std::string budget;
  if (v.budget > 0) budget.append("/").append(std::to_string(v.budget));
  std::string tail;
  if (std::isfinite(left)) {
    tail = bounded ? ", at most " : ", ~";
    tail += format_duration(std::max(0.0, left));
    tail += " left";
  }
  std::snprintf(buf, sizeof buf, "[search] %lld%s %s, %lld unique, best %.4g ms | %s%s", static_cast<long long>(used), budget.c_str(),
                v.rl ? "agent actions" : "graphs expanded", static_cast<long long>(r.unique_graphs), v.best,
                format_duration(searched).c_str(), tail.c_str());
  return buf;
}

}  // namespace

struct OptimiseProgress::View : SearchView {};

OptimiseProgress::OptimiseProgress(const OptimiseOptions& o, bool enabled)
    : view_(std::make_unique<View>()), line_(enabled, [v = view_.get()](double elapsed) { return search_line(*v, elapsed); }) {
  // A strategy whose budget counts agent actions (rl) says so on the line.
  const search::Strategy* strategy = search::find_strategy(o.search);
  view_->rl = strategy && strategy->budget_counts_actions;
  view_->none = o.search == "none";
  view_->budget = o.budget;
  // As pipeline::optimise sets search::Limits::time_limit_s.
  view_->time_limit_s = o.time_limit_s >= 0 ? o.time_limit_s : (o.cost.deterministic ? 0 : pipeline::kInteractiveTimeLimitS);
}

OptimiseProgress::~OptimiseProgress() = default;

pipeline::OptimiseHooks OptimiseProgress::hooks() {
  pipeline::OptimiseHooks hooks;
  if (!line_.enabled()) return hooks;
  View* view = view_.get();
  ProgressLine* line = &line_;
  hooks.progress = [view, line](const search::Report& r, double best) {
    line->update([&] {
      view->seen = true;
      view->stage.clear();  // a search again (--opset auto's second try at the input's opset)
      view->report = r;
      view->best = best;
      view->at = Clock::now();
    });
  };
  hooks.stage = [view, line](const std::string& stage) {
    line->update([&] {
      view->stage = stage;
      view->stage_at = Clock::now();
    });
  };
  return hooks;
}

int cmd_optimise(const GlobalOptions& g, const OptimiseOptions& o) {
  OptimiseProgress progress(o, progress_wanted(g.json));
  auto report = pipeline::optimise(o, progress.hooks());
  progress.finish();
  return print_report(g, report);
}

namespace {

// The registered fusions for help text: "layer_norm, gelu, ..." or, with ops, "layer_norm ->
// LayerNormalization (17), ...".
std::string fusion_list(bool with_ops) {
  std::string out;
  for (const auto& f : ir::fusions()) {
    out += (out.empty() ? "" : ", ") + f.name;
    if (with_ops) out += fmt::format(" -> {} ({})", f.onnx_op, f.since_opset);
  }
  return out;
}

}  // namespace

std::shared_ptr<OptimiseOptions> declare_optimise(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto o = std::make_shared<OptimiseOptions>();
  auto& opt = *o;
  auto* c_opt = app.add_subcommand("optimise", "Rewrite a model into a faster equivalent one");
  c_opt->alias("optimize");
  c_opt->add_option("model", opt.model, "ONNX model")->required();
  c_opt->add_option("-o,--output", opt.output, "Where to write the optimised model")->required();
  c_opt->add_option("--report", opt.report_html,
                    "Also write an HTML page (self-contained) of what changed: op histograms, each fusion and rewrite with its cost, "
                    "cost by op type, measured latencies, verification");
  c_opt->add_option("--search", opt.search, "Search strategy: " + pipeline::search_help())
      ->check(CLI::IsMember(pipeline::search_names()))
      ->capture_default_str();
  c_opt->add_option("--alpha", opt.strategy.alpha, "taso: keep graphs whose cost is below alpha x the best")->check(kPositive)->capture_default_str();
  c_opt->add_option("--budget", opt.budget, "Graphs expanded at most (greedy: steps)")->check(kAtLeastOne)->capture_default_str();
  c_opt->add_option("--time-limit", opt.time_limit_s,
                    "Search wall-time limit in seconds, 0: none (default: 10, none with --deterministic)")
      ->check(kNonNegative);
  c_opt->add_option("--memory-limit", opt.memory_mb,
                    "Memory the run may use, MiB (default: 3/4 of this machine's); a model whose run needs more is refused "
                    "(exit 3), and the search stores graphs in at most a quarter of it")
      ->check(kPositive);
  c_opt->add_option("--rules", opt.rules_file, "Rule file (default: the shipped configs/rules/default.json)");
  c_opt->add_flag("--all-rules", opt.all_rules, "Use every verified rule, numerically verified ones included, not just the proved default set");
  c_opt->add_flag("--composites,!--no-composites", opt.composites,
                  "Fuse decomposed chains (GELU, LayerNorm, RMSNorm, ...) into single ops before searching (default on; not with --search none)");
  c_opt->add_option("--disable-fusion", opt.disabled_fusions,
                    "Leave these fusions' chains as they are (repeat, or a comma list): " + fusion_list(false))
      ->delimiter(',');
  add_opset_option(c_opt, opt.opset,
                   "The output's default-domain opset. auto (default): the newest the target's runtime runs (`rlflow targets`), at least "
                   "the input's, where a chain fuses there and not at the input's (" + fusion_list(true) + "); a model "
                   "with nothing to fuse, or written as it is, keeps its own. "
                   "keep: the input's. N: that opset (refused when an op rlflow keeps verbatim changes between the two)");
  c_opt->add_option("--target", opt.target, "Where the model will run: ort (onnxruntime on this CPU), h100, or gpu (this machine's GPU); `rlflow targets` describes each")
      ->check(CLI::IsMember(pipeline::target_names()))->capture_default_str();
  c_opt->add_option("--cost-model", opt.cost.kind, cost::cost_model_help("the --target's: ort -> ort, h100 -> recorded, gpu -> cudnn"))
      ->check(CLI::IsMember(cost::cost_model_kinds()))
      ->capture_default_str();
  c_opt->add_flag("--deterministic", opt.cost.deterministic,
                  "Exactly reproducible: a measured cost model (cpu, cudnn) gives way to the analytic one (recorded and ort are "
                  "deterministic already), no time limit, no measuring");
  c_opt->add_option("--device-profile", opt.cost.device_profile, "Analytic device profile (configs/devices/NAME.yaml)");
  c_opt->add_option("--cost-table", opt.cost.cost_table, "recorded: table of measured op timings (default configs/devices/h100-cost-table.json)");
  c_opt->add_option("--measure", opt.measure,
                    "Measure the result against the input on the target before writing it: auto (when the target runs here; not with "
                    "--deterministic), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  c_opt->add_option("--bench-rounds", opt.bench.rounds, "Measurement: interleaved rounds per candidate before the first look")
      ->check(kAtLeastOne)->capture_default_str();
  c_opt->add_option("--bench-max-rounds", opt.bench.max_rounds,
                    "Measurement: a sequential test runs 10 more rounds at a time while the speedup's interval straddles 0.99, up to "
                    "this many (and --bench-max-seconds); at most --bench-rounds: a fixed number")
      ->check(kAtLeastOne)->capture_default_str();
  c_opt->add_option("--deploy", opt.deploy,
                    "Where the model runs, which the measurement gates: prefill (the representative sizes), decode (a decode step of a "
                    "KV-cache decoder, else sequence 1), both")
      ->check(CLI::IsMember({"prefill", "decode", "both"}))->capture_default_str();
  c_opt->add_option("--bench-clock", opt.bench_clock,
                    "Measurement on ort: auto (a 1-thread session in its thread's CPU time, which load does not inflate; wall clock "
                    "with more threads) or wall (wall clock always)")
      ->check(CLI::IsMember({"auto", "wall"}))->capture_default_str();
  c_opt->add_option("--bench-threads", opt.bench_threads, "Measurement on ort: onnxruntime intra-op threads (0: every core)")
      ->check(CLI::Range(0, pipeline::max_threads()))->capture_default_str();
  c_opt->add_option("--bench-max-seconds", opt.bench.max_seconds, "Measurement: stop a candidate's rounds after this long (at least 10 rounds)")
      ->check(kPositive)->capture_default_str();
  c_opt->add_option("--candidates", opt.candidates, "Graphs measured, best predicted first, before the input is kept")->check(kAtLeastOne)->capture_default_str();
  c_opt->add_option("--input-shape", opt.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_opt->add_option("--fix", opt.fixed_dims,
                    "Specialise a symbolic dim for good, e.g. batch=1 (repeatable): it is static in the output, the other "
                    "symbols stay dynamic and are verified at other sizes");
  c_opt->add_flag("--verify,!--no-verify", opt.verify, "Check the result against the original (default on)");
  c_opt->add_option("--seed", opt.seed, "Seed for verification inputs")->check(kNonNegative)->capture_default_str();
  c_opt->add_option("--atol", opt.compare.atol, "Absolute tolerance of verification")->check(kTolerance)->capture_default_str();
  c_opt->add_option("--rtol", opt.compare.rtol, "Relative tolerance of verification")->check(kTolerance)->capture_default_str();
  c_opt->add_option("--agent", opt.rl.agent_path,
                    "rl: the agent checkpoint (rlflow train-agent --out; default: the shipped configs/agents/zoo-h100.pt, "
                    "trained on three zoo CNNs under the recorded H100 cost)");
  c_opt->add_option("--rollouts", opt.rl.rollouts, "rl: sampled rollouts after the greedy one; the best graph wins")->check(kNonNegative)->capture_default_str();
  c_opt->add_option("--beam", opt.rl.beam, "rl: then a policy-guided beam search of this width (0: none)")->check(kNonNegative)->capture_default_str();
  c_opt->add_option("--beam-branch", opt.rl.beam_branch, "rl: rewrites the policy proposes per beam state")->check(kAtLeastOne)->capture_default_str();
  c_opt->add_flag("--polish", opt.rl.polish, "rl: then greedy descent from the agent's best graph to a local optimum");
  c_opt->add_flag("--never-below-greedy", opt.rl.never_below_greedy,
                  "rl: then greedy search from the input too (in what is left of the limits), and return its graph when the agent's is not cheaper (reported)");
  c_opt->add_flag("--json", g.json, "Print one JSON document");
  out.push_back({c_opt, [&g, o] { return cmd_optimise(g, *o); }});
  return o;
}

}  // namespace rlflow::cli
