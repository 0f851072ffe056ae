#pragma once
// The end-to-end benchmark behind `rlflow bench` and optimise's never-slower check: every model
// is warmed up, then each round runs every model once in a new random order, so drift in the
// machine's speed hits all models alike; medians and paired speedups come with confidence
// intervals (stats.h).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rlflow/bench/runner.h"
#include "rlflow/bench/stats.h"

namespace rlflow::bench {

// optimise's rule: a rewritten model is written only if its speedup's lower confidence bound is
// at least this (not measurably slower than its input).
inline constexpr double kMinSpeedupLowerBound = 0.99;

struct BenchOptions {
  int warmup = 3;    // untimed runs of each model before the first round
  int rounds = 30;   // timed runs of each model, one per round
  double confidence = 0.95;
  uint64_t seed = 0;  // the order of models in each round
  // Stop after the round in which this many seconds have passed (0: no limit), keeping at least
  // min_rounds; slow models then still finish in bounded time.
  double max_seconds = 0;
  int min_rounds = 10;
  // judge() only: a sequential test. After `rounds` rounds, while the speedup's interval still
  // straddles kMinSpeedupLowerBound (neither lower bound >= it nor upper bound < it), `step` more
  // rounds are run, up to max_rounds in all and within max_seconds. 0: `rounds` rounds, fixed.
  int max_rounds = 0;
  int step = 10;
  // judge() only: the candidate is accepted when the speedup's lower bound is >= accept_at, and
  // the test is decided when it is, or when the upper bound is < refuse_below (>= accept_at; an
  // indifference zone between them lets a tie decide "not faster" without running out the rounds).
  double accept_at = kMinSpeedupLowerBound;
  double refuse_below = kMinSpeedupLowerBound;
};

struct FileResult {
  std::vector<double> ms;  // one per round, in round order
  double median_ms = 0;
  Interval median_ci;
  Speedup speedup;  // of this model over the first one (paired by round)
};

struct BenchResult {
  std::string runner;
  int rounds = 0;
  std::vector<FileResult> files;
};

// Called after each round with (rounds done, rounds planned).
using BenchProgress = std::function<void(int, int)>;

// Measures models already loaded into `runner` (their load() indices; the first is the baseline).
// files[k] of the result belongs to ids[k].
Expected<BenchResult> run_bench(Runner& runner, const std::vector<size_t>& ids, const BenchOptions& opts,
                                const BenchProgress& progress = {});


struct Verdict {
  double base_ms = 0, ms = 0;  // medians
  Speedup speedup;             // of the candidate over the baseline
  bool accepted = false;       // speedup.ci.lo >= kMinSpeedupLowerBound
  // The interval lies wholly on one side of kMinSpeedupLowerBound; false: the rounds or the time
  // ran out first, and the candidate is refused (not shown to be no slower).
  bool decided = true;
  int rounds = 0;
  std::string runner;
  std::vector<double> base_samples_ms, samples_ms;  // one per round, in round order
};

// Measures a candidate against its baseline (both loaded into `runner`) with the benchmark's
// method and applies the never-slower rule, sequentially where opts.max_rounds > opts.rounds.
Expected<Verdict> judge(Runner& runner, size_t baseline, size_t candidate, const BenchOptions& opts,
                        const BenchProgress& progress = {});

}  // namespace rlflow::bench
