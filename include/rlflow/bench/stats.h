#pragma once
// Statistics of end-to-end latency measurements: medians, distribution-free confidence intervals
// for a median, and paired speedups of interleaved runs. Pure functions, no I/O.
#include <cstddef>
#include <vector>

namespace rlflow::bench {

struct Interval {
  double lo = 0, hi = 0;
  double coverage = 0;  // the interval's actual confidence (order statistics give discrete levels)
};

double median(std::vector<double> v);

// Confidence interval for the median of the distribution the sample came from, from its order
// statistics: [x_(j), x_(n+1-j)] with the largest j for which a Binomial(n, 1/2) puts at most
// (1 - confidence) / 2 below j. Distribution-free: it assumes independent draws, not normality.
// With too few samples for the level asked, it is [min, max] and `coverage` says what that gives.
Interval median_ci(std::vector<double> v, double confidence = 0.95);

// Speedup of `other` over `base` from paired runs: pair k ran in the same round, so drift in the
// machine's speed (other load, clocks, thermal) hits both alike. The estimate is the median of
// base[k] / other[k]; its interval is median_ci of those ratios. > 1 means `other` is faster.
struct Speedup {
  double estimate = 1;
  Interval ci{1, 1, 1};
};
Speedup paired_speedup(const std::vector<double>& base, const std::vector<double>& other, double confidence = 0.95);

}  // namespace rlflow::bench
