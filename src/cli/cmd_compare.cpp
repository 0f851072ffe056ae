// `rlflow compare`: its flags, bound to the library's options (include/rlflow/pipeline/compare.h),
// with a progress line on a terminal and its table (or --json) on stdout.
#include <string>

#include "commands.h"
#include "flags.h"
#include "progress.h"
#include "rlflow/pipeline/compare.h"

namespace rlflow::cli {

namespace {

int cmd_compare(const GlobalOptions& g, pipeline::ComparePeersOptions o, const std::string& peers) {
  o.peers.clear();
  for (size_t pos = 0; !peers.empty() && pos <= peers.size();) {
    const size_t end = std::min(peers.find(',', pos), peers.size());
    if (end > pos) o.peers.push_back(peers.substr(pos, end - pos));
    pos = end + 1;
  }
  std::string stage = "importing";
  int done = 0, planned = 0;
  ProgressLine line(progress_wanted(g.json), [&](double elapsed) {
    std::string s = "[compare] " + stage;
    if (planned > 0) s += ", round " + std::to_string(done) + "/" + std::to_string(planned);
    return s + "  " + format_duration(elapsed);
  });
  pipeline::CompareHooks hooks;
  hooks.stage = [&](const std::string& text) { line.update([&] { stage = text, done = 0, planned = 0; }); };
  hooks.round = [&](int d, int p) { line.update([&] { done = d, planned = p; }); };
  hooks.rlflow.stage = [&](const std::string& text) { line.update([&] { stage = "rlflow: " + text; }); };
  auto report = pipeline::compare_peers(o, hooks);
  line.finish();
  return print_report(g, report);
}

}  // namespace

void declare_compare(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto o = std::make_shared<pipeline::ComparePeersOptions>();
  auto peers = std::make_shared<std::string>();
  for (const auto& p : pipeline::default_peers()) *peers += (peers->empty() ? "" : ",") + p;
  auto* c = app.add_subcommand("compare",
                               "Run the peer tools (onnxslim, onnxsim, onnxoptimizer, onnxscript's ort_fusions, onnxruntime's transformer "
                               "optimizer) and rlflow on one model, check every file against it in onnxruntime at every binding of its "
                               "symbolic dims, and time the right ones interleaved at prefill and at a decode step");
  c->add_option("model", o->model, "ONNX model")->required();
  c->add_option("--peers", *peers,
                "Comma list: onnxslim, onnxsim, onnxoptimizer, ort-fusions, ort-transformers (model type gpt2; ort-transformers:TYPE "
                "for another), resaved (the input loaded and saved by onnx: a noise control, never the fastest peer), script:PATH (`python PATH IN OUT`, a pipeline of your own); a peer not installed is listed as such")
      ->capture_default_str();
  c->add_option("--timeout", o->timeout_s, "Seconds each peer tool may take")->check(kPositive)->capture_default_str();
  c->add_option("--threads", o->threads, "onnxruntime intra-op threads of the timing (0: every core; 1 is timed in thread CPU time)")
      ->check(CLI::Range(0, pipeline::max_threads()))->capture_default_str();
  c->add_option("--rounds", o->bench.rounds, "Interleaved rounds at each timed binding")->check(kAtLeastOne)->capture_default_str();
  c->add_option("--max-seconds", o->bench.max_seconds, "Stop a binding's rounds after this long (at least 10 rounds; 0: no limit)")
      ->check(kNonNegative)->capture_default_str();
  c->add_option("--atol", o->atol, "Absolute tolerance of the onnxruntime check")->check(kTolerance)->capture_default_str();
  c->add_option("--rtol", o->rtol, "Relative tolerance of the onnxruntime check")->check(kTolerance)->capture_default_str();
  c->add_option("--keep", o->keep_dir, "Keep every tool's file in this folder (default: a temporary folder, removed)");
  c->add_option("--report", o->report_html, "Also write rlflow's HTML page with the comparison as a plot and a table");
  c->add_option("--search", o->rlflow.search, "rlflow's search strategy: " + pipeline::search_help())
      ->check(CLI::IsMember(pipeline::search_names()))->capture_default_str();
  c->add_option("--time-limit", o->rlflow.time_limit_s, "rlflow's search wall-time limit in seconds (default: optimise's)")->check(kNonNegative);
  c->add_option("--deploy", o->rlflow.deploy, "What rlflow's measured gate gates: prefill, decode, both")
      ->check(CLI::IsMember({"prefill", "decode", "both"}))->capture_default_str();
  c->add_option("--input-shape", o->rlflow.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c->add_option("--fix", o->rlflow.fixed_dims, "Specialise a symbolic dim for good, e.g. batch=1 (repeatable), as optimise --fix");
  c->add_option("--seed", o->rlflow.seed, "Seed of the check's inputs, of the timing's order and of rlflow's run")->check(kNonNegative)->capture_default_str();
  c->add_flag("--json", g.json, "Print one JSON document");
  out.push_back({c, [&g, o, peers] { return cmd_compare(g, *o, *peers); }});
}

}  // namespace rlflow::cli
