#pragma once
// `rlflow bench` as a library: ONNX files measured end to end on a target, interleaved in a new
// random order each round, at one or more thread counts; the median latency of each and its speedup
// over the first file, with confidence intervals. It does not print: hooks report its stages and
// rounds, and the typed report prints itself as text or JSON.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/bench/bench.h"
#include "rlflow/util/expected.h"

namespace rlflow::pipeline {

// Every default of `bench`; the CLI binds its flags to these fields.
struct BenchFilesOptions {
  std::vector<std::string> files;  // the first is the baseline
  std::string target = "ort";      // optimise --target's words (ort, gpu, h100), or bench's own cudnn and cpu
  std::string threads;             // comma list of counts or "all"; empty: ort "1,all", others "1"
  std::vector<std::string> input_shapes;
  bench::BenchOptions bench;       // rounds, warmup, confidence, max_seconds, seed: the library's defaults
};

// One thread count's measurement.
struct BenchRun {
  int threads = 0;  // 0: every core
  bench::BenchResult result;
};

struct BenchFilesReport {
  std::string target;
  std::vector<std::string> files;
  bench::BenchOptions options;
  std::vector<BenchRun> runs;  // in the order of the thread list

  nlohmann::json to_json() const;
  void print(std::FILE* out) const;                         // every run's table
  void print_run(std::FILE* out, const BenchRun& r) const;  // one run's table
};

// Where a thread count's run is, before its timed rounds.
struct BenchStage {
  enum Kind { kStartingRunner, kLoading, kWarmingUp } kind = kStartingRunner;
  std::string threads;  // "all" or the count
  std::string runner;   // the runner's description, once it has started
  std::string text;     // "starting the runner", "loading 2 files", "warming up (3 runs of each file)"
};

struct BenchFilesHooks {
  std::function<void(const BenchStage&)> stage;
  std::function<void(int done, int planned)> round;  // after each timed round
  std::function<void(const BenchFilesReport& so_far, const BenchRun& run)> measured;  // a thread count is done
};

// Errors carry their exit class: a bad --threads is a usage error, a file that cannot be read bad input.
Expected<BenchFilesReport> bench_files(const BenchFilesOptions& o, const BenchFilesHooks& hooks = {});

// The most threads a flag accepts: 4x this machine's cores. More only measure contention, and
// 100,000 of them never finish starting.
int max_threads();
// "1,all" -> {1, 0} (0: every core); a count above max_threads() is a usage error.
Expected<std::vector<int>> parse_thread_list(const std::string& text);

}  // namespace rlflow::pipeline
