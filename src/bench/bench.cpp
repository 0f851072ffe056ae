#include "rlflow/bench/bench.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

namespace rlflow::bench {

Expected<BenchResult> run_bench(Runner& runner, const std::vector<size_t>& ids, const BenchOptions& opts,
                                const BenchProgress& progress) {
  const size_t n = ids.size();
  if (n == 0) return Error{ErrorCode::kUsage, "nothing to measure"};
  if (opts.rounds < 1) return Error{ErrorCode::kUsage, "at least one round is needed"};
  std::mt19937_64 rng(opts.seed);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  // Warm-up interleaved too, so no model gets a cold machine to itself.
  for (int w = 0; w < opts.warmup; ++w) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order)
      if (auto r = runner.run(ids[i]); !r) return r.error();
  }
  BenchResult res;
  res.runner = runner.description();
  res.files.resize(n);
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < opts.rounds; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      auto ms = runner.run(ids[i]);
      if (!ms) return ms.error();
      res.files[i].ms.push_back(*ms);
    }
    res.rounds = round + 1;
    if (progress) progress(res.rounds, opts.rounds);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (opts.max_seconds > 0 && elapsed > opts.max_seconds && res.rounds >= opts.min_rounds) break;
  }
  for (auto& f : res.files) {
    f.median_ms = median(f.ms);
    f.median_ci = median_ci(f.ms, opts.confidence);
    f.speedup = paired_speedup(res.files[0].ms, f.ms, opts.confidence);
  }
  return res;
}

Expected<Verdict> judge(Runner& runner, size_t baseline, size_t candidate, const BenchOptions& opts, const BenchProgress& progress) {
  auto res = run_bench(runner, {baseline, candidate}, opts, progress);
  if (!res) return res.error();
  Verdict v;
  v.base_ms = res->files[0].median_ms;
  v.ms = res->files[1].median_ms;
  v.speedup = res->files[1].speedup;
  v.accepted = v.speedup.ci.lo >= kMinSpeedupLowerBound;
  v.rounds = res->rounds;
  v.runner = res->runner;
  v.base_samples_ms = res->files[0].ms;
  v.samples_ms = res->files[1].ms;
  return v;
}

}  // namespace rlflow::bench
