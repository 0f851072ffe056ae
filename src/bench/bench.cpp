#include "rlflow/bench/bench.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

namespace rlflow::bench {

namespace {

// Interleaved rounds of some loaded models, which can be continued: each round runs every model once
// in a new random order.
class Rounds {
 public:
  Rounds(Runner& runner, const std::vector<size_t>& ids, const BenchOptions& opts)
      : runner_(runner), ids_(ids), opts_(opts), rng_(opts.seed), order_(ids.size()) {
    std::iota(order_.begin(), order_.end(), size_t{0});
    res_.files.resize(ids.size());
  }

  // Warm-up interleaved too, so no model gets a cold machine to itself.
  Status warm_up() {
    for (int w = 0; w < opts_.warmup; ++w) {
      std::shuffle(order_.begin(), order_.end(), rng_);
      for (size_t i : order_)
        if (auto r = runner_.run(ids_[i]); !r) return r.error();
    }
    res_.runner = runner_.description();
    t0_ = std::chrono::steady_clock::now();
    return {};
  }

  // Runs up to `n` more rounds; stops early once max_seconds have passed (keeping min_rounds).
  Status more(int n, int planned, const BenchProgress& progress) {
    for (int k = 0; k < n; ++k) {
      std::shuffle(order_.begin(), order_.end(), rng_);
      for (size_t i : order_) {
        auto ms = runner_.run(ids_[i]);
        if (!ms) return ms.error();
        res_.files[i].ms.push_back(*ms);
      }
      ++res_.rounds;
      if (progress) progress(res_.rounds, planned);
      if (out_of_time()) break;
    }
    return {};
  }

  bool out_of_time() const {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    return opts_.max_seconds > 0 && elapsed > opts_.max_seconds && res_.rounds >= opts_.min_rounds;
  }

  const BenchResult& result() {
    for (auto& f : res_.files) {
      f.median_ms = median(f.ms);
      f.median_ci = median_ci(f.ms, opts_.confidence);
      f.speedup = paired_speedup(res_.files[0].ms, f.ms, opts_.confidence);
    }
    return res_;
  }

 private:
  Runner& runner_;
  const std::vector<size_t>& ids_;
  const BenchOptions& opts_;
  std::mt19937_64 rng_;
  std::vector<size_t> order_;
  BenchResult res_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

Expected<BenchResult> run_bench(Runner& runner, const std::vector<size_t>& ids, const BenchOptions& opts,
                                const BenchProgress& progress) {
  if (ids.empty()) return Error{ErrorCode::kUsage, "nothing to measure"};
  if (opts.rounds < 1) return Error{ErrorCode::kUsage, "at least one round is needed"};
  Rounds r(runner, ids, opts);
  if (auto s = r.warm_up(); !s) return s.error();
  if (auto s = r.more(opts.rounds, opts.rounds, progress); !s) return s.error();
  return r.result();
}

Expected<Verdict> judge(Runner& runner, size_t baseline, size_t candidate, const BenchOptions& opts, const BenchProgress& progress) {
  if (opts.rounds < 1) return Error{ErrorCode::kUsage, "at least one round is needed"};
  const std::vector<size_t> ids{baseline, candidate};
  Rounds r(runner, ids, opts);
  if (auto s = r.warm_up(); !s) return s.error();
  const int planned = std::max(opts.rounds, opts.max_rounds);
  if (auto s = r.more(opts.rounds, planned, progress); !s) return s.error();
  if (!(opts.refuse_below >= opts.accept_at)) return Error::internal("judge: refuse_below must be >= accept_at");
  auto decided = [&](const Speedup& s) { return s.ci.lo >= opts.accept_at || s.ci.hi < opts.refuse_below; };
  // The sequential test: more rounds while the interval straddles the bound. Looking after every
  // step makes an undecided interval likelier to cross by chance than one fixed-length look; the
  // bound is a lower confidence bound at 0.99, so a crossing still needs the data on that side.
  while (!decided(r.result().files[1].speedup) && r.result().rounds < opts.max_rounds && !r.out_of_time())
    if (auto s = r.more(std::min(std::max(1, opts.step), opts.max_rounds - r.result().rounds), planned, progress); !s) return s.error();
  const auto& res = r.result();
  Verdict v;
  v.base_ms = res.files[0].median_ms;
  v.ms = res.files[1].median_ms;
  v.speedup = res.files[1].speedup;
  v.accepted = v.speedup.ci.lo >= opts.accept_at;
  v.decided = decided(v.speedup);
  v.rounds = res.rounds;
  v.runner = res.runner;
  v.base_samples_ms = res.files[0].ms;
  v.samples_ms = res.files[1].ms;
  return v;
}

}  // namespace rlflow::bench
