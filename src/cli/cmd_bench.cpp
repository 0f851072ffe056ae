// `rlflow bench`: measured end-to-end latency of ONNX files on a target, interleaved, with
// confidence intervals.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "commands.h"
#include "flags.h"
#include "progress.h"
#include "rlflow/bench/bench.h"
#include "rlflow/cli/app.h"

namespace rlflow::cli {

using json = nlohmann::json;

int max_threads() { return 4 * std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

Expected<std::vector<int>> parse_thread_list(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    if (item == "all") out.push_back(0);
    else {
      try {
        size_t used = 0;
        const int v = std::stoi(item, &used);
        if (used != item.size() || v < 1) throw std::invalid_argument(item);
        if (v > max_threads())
          return Error{ErrorCode::kUsage, "--threads: " + item + " is more than " + std::to_string(max_threads()) +
                                              " (4x this machine's cores)"};
        out.push_back(v);
      } catch (const std::exception&) {
        return Error{ErrorCode::kUsage, "--threads: '" + item + "' is not a thread count (a positive number or 'all')"};
      }
    }
    pos = end + 1;
  }
  return out;
}

json bench_json(const bench::BenchResult& r, const std::vector<std::string>& files, int threads, const bench::BenchOptions& o) {
  json fs = json::array();
  for (size_t i = 0; i < r.files.size(); ++i) {
    const auto& f = r.files[i];
    fs.push_back({{"file", files[i]},
                  {"median_ms", f.median_ms},
                  {"median_ci_ms", {f.median_ci.lo, f.median_ci.hi}},
                  {"speedup", f.speedup.estimate},
                  {"speedup_ci", {f.speedup.ci.lo, f.speedup.ci.hi}},
                  {"ms", f.ms}});
  }
  const double coverage = r.files.empty() ? 0 : r.files.back().speedup.ci.coverage;
  return {{"runner", r.runner}, {"threads", threads}, {"rounds", r.rounds}, {"warmup", o.warmup},
          {"confidence", o.confidence}, {"ci_coverage", coverage}, {"files", fs}};
}

void print_bench(const bench::BenchResult& r, const std::vector<std::string>& files, const bench::BenchOptions& o) {
  std::printf("%s; %d rounds in random order after %d warm-up runs each\n", r.runner.c_str(), r.rounds, o.warmup);
  const int pct = static_cast<int>(o.confidence * 100 + 0.5);
  std::printf("  %-40s %10s  %-21s %9s  %s\n", "file", "median ms", (std::to_string(pct) + "% CI").c_str(), "speedup",
              (std::to_string(pct) + "% CI (paired by round)").c_str());
  for (size_t i = 0; i < r.files.size(); ++i) {
    const auto& f = r.files[i];
    std::string name = std::filesystem::path(files[i]).filename().string();
    if (i == 0) name += " (baseline)";
    char ci[64], sci[64] = "";
    std::snprintf(ci, sizeof ci, "[%.3f, %.3f]", f.median_ci.lo, f.median_ci.hi);
    if (i > 0) std::snprintf(sci, sizeof sci, "[%.3fx, %.3fx]", f.speedup.ci.lo, f.speedup.ci.hi);
    std::printf("  %-40s %10.3f  %-21s %8.3fx  %s\n", name.c_str(), f.median_ms, ci, f.speedup.estimate, sci);
  }
}

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

}  // namespace

int cmd_bench(const GlobalOptions& g, const BenchCmdOptions& o) {
  auto threads = parse_thread_list(o.threads.empty() ? (o.target == "ort" ? "1,all" : "1") : o.threads);
  if (!threads) return report_error(g, threads.error());
  BenchView view;
  view.files = static_cast<int>(o.files.size());
  view.warmup = o.bench.warmup;
  view.min_rounds = o.bench.min_rounds;
  view.max_seconds = o.bench.max_seconds;
  ProgressLine line(progress_wanted(g.json), [&view](double elapsed) { return bench_line(view, elapsed); });
  auto fail = [&](const Error& e) {
    line.finish();
    return report_error(g, e);
  };
  // Every file is imported first: a bad file is a clean error before anything is timed, and the
  // graph runners need the graphs.
  exec::Executor ex;
  std::vector<bench::BenchModel> models;
  for (const auto& f : o.files) {
    auto graph = load_model(f, o.input_shapes, ex);
    // onnxruntime needs only the input shapes, so a file rlflow cannot import (a contrib op with an
    // output rlflow cannot type, say) still runs there, with the first file's inputs.
    // Only a model rlflow cannot type falls back: a corrupt or missing file is an error, reported first.
    if (!graph && o.target == "ort" && !models.empty() && graph.error().code == ErrorCode::kUnsupported) {
      spdlog::warn("{}; onnxruntime runs it with the first file's input shapes", graph.error().message);
      models.push_back({f, models.front().graph});
      continue;
    }
    if (!graph) return fail(graph.error());
    models.push_back({f, std::move(*graph)});
  }
  const bench::BenchOptions& bo = o.bench;
  json runs = json::array();
  for (int t : *threads) {
    bench::RunnerOptions ro;
    auto named = pipeline::find_target(o.target);  // optimise --target's words; cudnn and cpu are bench's own
    ro.target = named ? (*named)->bench : o.target;
    ro.threads = t;
    ro.seed = o.bench.seed;
    line.update([&] {
      view.threads = t == 0 ? "all" : std::to_string(t);
      view.runner.clear();
      view.stage = "starting the runner";
    });
    auto runner = bench::make_runner(ro);
    if (!runner) return fail(runner.error());
    line.update([&] {
      view.runner = (*runner)->description();
      view.stage = "loading " + std::to_string(models.size()) + (models.size() == 1 ? " file" : " files");
    });
    std::vector<size_t> ids;
    for (const auto& m : models) {
      auto id = (*runner)->load(m);
      if (!id) return fail(id.error());
      ids.push_back(*id);
    }
    line.update([&] {
      view.stage = "warming up (" + std::to_string(bo.warmup) + " runs of each file)";
      view.started = Clock::now();
    });
    auto res = bench::run_bench(**runner, ids, bo, [&](int done, int planned) {
      line.update([&] {
        view.stage = "rounds";
        view.done = done;
        view.planned = planned;
        view.last = Clock::now();
      });
    });
    line.update([&] { view.done = 0; });
    if (!res) return fail(res.error());
    if (g.json) runs.push_back(bench_json(*res, o.files, t, bo));
    else line.print([&] { print_bench(*res, o.files, bo); });
  }
  line.finish();
  if (g.json) std::cout << json_text(json{{"ok", true}, {"target", o.target}, {"runs", runs}}) << std::endl;
  return kOk;
}

void declare_run_bench(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto run_o = std::make_shared<RunOptions>();
  auto bench_o = std::make_shared<BenchCmdOptions>();
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
