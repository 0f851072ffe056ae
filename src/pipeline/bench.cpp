#include "rlflow/pipeline/bench.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "rlflow/exec/executor.h"
#include "rlflow/pipeline/load.h"
#include "rlflow/pipeline/target.h"

namespace rlflow::pipeline {

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

Expected<BenchFilesReport> bench_files(const BenchFilesOptions& o, const BenchFilesHooks& hooks) {
  auto threads = parse_thread_list(o.threads.empty() ? (o.target == "ort" ? "1,all" : "1") : o.threads);
  if (!threads) return threads.error();
  auto stage = [&](BenchStage::Kind kind, int t, const std::string& runner, const std::string& text) {
    if (hooks.stage) hooks.stage({kind, t == 0 ? "all" : std::to_string(t), runner, text});
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
    if (!graph) return graph.error();
    models.push_back({f, std::move(*graph)});
  }
  BenchFilesReport report;
  report.target = o.target;
  report.files = o.files;
  report.options = o.bench;
  auto named = find_target(o.target);  // optimise --target's words; cudnn and cpu are bench's own
  const std::string runner_target = named ? (*named)->bench : o.target;
  for (int t : *threads) {
    bench::RunnerOptions ro;
    ro.target = runner_target;
    ro.threads = t;
    ro.seed = o.bench.seed;
    stage(BenchStage::kStartingRunner, t, "", "starting the runner");
    auto runner = bench::make_runner(ro);
    if (!runner) return runner.error();
    const std::string description = (*runner)->description();
    stage(BenchStage::kLoading, t, description, "loading " + std::to_string(models.size()) + (models.size() == 1 ? " file" : " files"));
    std::vector<size_t> ids;
    for (const auto& m : models) {
      auto id = (*runner)->load(m);
      if (!id) return id.error();
      ids.push_back(*id);
    }
    stage(BenchStage::kWarmingUp, t, description, "warming up (" + std::to_string(o.bench.warmup) + " runs of each file)");
    auto res = bench::run_bench(**runner, ids, o.bench, [&](int done, int planned) {
      if (hooks.round) hooks.round(done, planned);
    });
    if (!res) return res.error();
    report.runs.push_back({t, std::move(*res)});
    if (hooks.measured) hooks.measured(report, report.runs.back());
  }
  return report;
}

json BenchFilesReport::to_json() const {
  json runs_json = json::array();
  for (const auto& run : runs) {
    const auto& r = run.result;
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
    runs_json.push_back({{"runner", r.runner}, {"threads", run.threads}, {"rounds", r.rounds}, {"warmup", options.warmup},
                         {"confidence", options.confidence}, {"ci_coverage", coverage}, {"files", fs}});
  }
  return {{"ok", true}, {"target", target}, {"runs", runs_json}};
}

void BenchFilesReport::print_run(std::FILE* out, const BenchRun& run) const {
  const auto& r = run.result;
  std::fprintf(out, "%s; %d rounds in random order after %d warm-up runs each\n", r.runner.c_str(), r.rounds, options.warmup);
  const int pct = static_cast<int>(options.confidence * 100 + 0.5);
  std::fprintf(out, "  %-40s %10s  %-21s %9s  %s\n", "file", "median ms", (std::to_string(pct) + "% CI").c_str(), "speedup",
               (std::to_string(pct) + "% CI (paired by round)").c_str());
  for (size_t i = 0; i < r.files.size(); ++i) {
    const auto& f = r.files[i];
    std::string name = std::filesystem::path(files[i]).filename().string();
    if (i == 0) name += " (baseline)";
    char ci[64], sci[64] = "";
    std::snprintf(ci, sizeof ci, "[%.3f, %.3f]", f.median_ci.lo, f.median_ci.hi);
    if (i > 0) std::snprintf(sci, sizeof sci, "[%.3fx, %.3fx]", f.speedup.ci.lo, f.speedup.ci.hi);
    std::fprintf(out, "  %-40s %10.3f  %-21s %8.3fx  %s\n", name.c_str(), f.median_ms, ci, f.speedup.estimate, sci);
  }
}

void BenchFilesReport::print(std::FILE* out) const {
  for (const auto& run : runs) print_run(out, run);
}

}  // namespace rlflow::pipeline
