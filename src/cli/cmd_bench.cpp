// `rlflow run` and `rlflow bench`: their flags; bench's are bound to the library's options
// (include/rlflow/pipeline/bench.h), with its progress line on a terminal and its report on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "flags.h"
#include "progress.h"
#include "rlflow/cli/app.h"
#include "rlflow/pipeline/bench.h"

namespace rlflow::cli {

namespace {

using Clock = std::chrono::steady_clock;

// What bench's progress line shows: the stage, and once rounds run, how many and at what pace.
struct BenchView {
  std::string stage = "importing";  // importing, loading into the runner, warming up, rounds
  std::string threads;              // of the current runner
  std::string runner;               // its description
  int files = 0, warmup = 0, done = 0, planned = 0, min_rounds = 0;
  double max_seconds = 0;
  Clock::time_point started, last;  // the benchmark's start (warm-up included), the last round's end
};

std::string bench_line(const BenchView& v, double elapsed) {
  std::string head = "[bench] " + (v.threads.empty() ? std::string() : "threads " + v.threads + ": ");
  if (v.stage != "rounds") return head + v.stage + "  " + format_duration(elapsed) + (v.runner.empty() ? "" : "  (" + v.runner + ")");
  std::string text = head + "round " + std::to_string(v.done) + "/" + std::to_string(v.planned);
  if (v.done > 0) {
    // A warm-up pass runs every file once, as a round does: both count towards the pace.
    const double spent = std::chrono::duration<double>(v.last - v.started).count();
    const double per_round = spent / (v.warmup + v.done);
    double left = (v.planned - v.done) * per_round;
    if (v.max_seconds > 0) {
      const double rounds_s = v.done * per_round;  // --max-seconds counts from the first round
      left = std::min(left, std::max(v.max_seconds - rounds_s, (v.min_rounds - v.done) * per_round));
    }
    left -= std::chrono::duration<double>(Clock::now() - v.last).count();
    text += ", ~" + format_duration(std::max(0.0, left)) + " left";
  }
  return text + "  " + format_duration(elapsed) + "  (" + v.runner + ")";
}

int cmd_bench(const GlobalOptions& g, const pipeline::BenchFilesOptions& o) {
  BenchView view;
  view.files = static_cast<int>(o.files.size());
  view.warmup = o.bench.warmup;
  view.min_rounds = o.bench.min_rounds;
  view.max_seconds = o.bench.max_seconds;
  ProgressLine line(progress_wanted(g.json), [&view](double elapsed) { return bench_line(view, elapsed); });
  pipeline::BenchFilesHooks hooks;
  hooks.stage = [&](const pipeline::BenchStage& st) {
    line.update([&] {
      view.threads = st.threads;
      view.runner = st.runner;
      view.stage = st.text;
      if (st.kind == pipeline::BenchStage::kWarmingUp) view.started = Clock::now();
    });
  };
  hooks.round = [&](int done, int planned) {
    line.update([&] {
      view.stage = "rounds";
      view.done = done;
      view.planned = planned;
      view.last = Clock::now();
    });
  };
  // Each thread count's table as soon as it is measured, above the progress line.
  hooks.measured = [&](const pipeline::BenchFilesReport& so_far, const pipeline::BenchRun& run) {
    line.update([&] { view.done = 0; });
    if (!g.json) line.print([&] { so_far.print_run(stdout, run); });
  };
  auto report = pipeline::bench_files(o, hooks);
  line.finish();
  if (!report) return report_error(g, report.error());
  if (g.json) std::cout << json_text(report->to_json()) << std::endl;
  return kOk;
}

}  // namespace

void declare_run_bench(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto run_o = std::make_shared<RunOptions>();
  auto bench_o = std::make_shared<pipeline::BenchFilesOptions>();
  auto& run = *run_o;
  auto& bench = *bench_o;
  auto* c_run = app.add_subcommand("run", "Run a model on input_N.pb tensors with the reference executor and compare with output_N.pb");
  c_run->add_option("model", run.model, "ONNX model")->required();
  c_run->add_option("--data-dir", run.data_dir, "Folder with input_N.pb and output_N.pb")->required();
  c_run->add_option("--atol", run.atol, "Absolute tolerance")->check(kTolerance)->capture_default_str();
  c_run->add_option("--rtol", run.rtol, "Relative tolerance")->check(kTolerance)->capture_default_str();
  c_run->add_flag("--json", g.json, "Print one JSON document");

  auto* c_bench = app.add_subcommand("bench", "Measure ONNX files end to end on a target: median latency and speedup over the first file, with confidence intervals");
  c_bench->add_option("files", bench.files, "ONNX models; the first is the baseline")->required();
  c_bench->add_option("--target", bench.target,
                      "The words optimise --target uses: ort (onnxruntime CPU), gpu or h100 (rlflow's GPU runner: each file prepared "
                      "once, buffers and algorithms settled, then replayed as one captured CUDA graph; cudnn is the same); and cpu "
                      "(rlflow's reference executor)")
      ->check(CLI::IsMember({"ort", "gpu", "h100", "cudnn", "cpu"}))->capture_default_str();
  c_bench->add_option("--threads", bench.threads, "Comma-separated thread counts, 'all' = every core (default: ort 1,all; cpu 1)");
  c_bench->add_option("--rounds", bench.bench.rounds, "Timed runs of each file, one per round, in a new random order each round")->check(kAtLeastOne)->capture_default_str();
  c_bench->add_option("--warmup", bench.bench.warmup, "Untimed runs of each file first")->check(kNonNegative)->capture_default_str();
  c_bench->add_option("--max-seconds", bench.bench.max_seconds, "Stop after the round that passes this time (at least 10 rounds; 0: no limit)")->check(kNonNegative)->capture_default_str();
  c_bench->add_option("--confidence", bench.bench.confidence, "Confidence level of the intervals")->check(CLI::Range(0.5, 0.999))->capture_default_str();
  c_bench->add_option("--seed", bench.bench.seed, "Seed of the inputs and of the run order")->check(kNonNegative)->capture_default_str();
  c_bench->add_option("--input-shape", bench.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_bench->add_flag("--json", g.json, "Print one JSON document");
  out.push_back({c_run, [&g, run_o] { return cmd_run(g, *run_o); }});
  out.push_back({c_bench, [&g, bench_o] { return cmd_bench(g, *bench_o); }});
}

}  // namespace rlflow::cli
