#include "rlflow/bench/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace rlflow::bench {

namespace {

// P(B = i) for B ~ Binomial(n, 1/2).
double binomial_half_pmf(size_t n, size_t i) {
  return std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(static_cast<double>(n - i) + 1.0) +
                  static_cast<double>(n) * std::log(0.5));
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Interval median_ci(std::vector<double> v, double confidence) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double alpha = 1 - confidence;
  // j (1-based) = the largest with P(B <= j - 1) <= alpha / 2; then [x_(j), x_(n+1-j)]. The CDF is
  // accumulated term by term: one pass (a sum per j made a million rounds take minutes).
  size_t j = 0;
  double cdf = binomial_half_pmf(n, 0), below = 0;  // P(B <= j), P(B <= j - 1)
  while (j + 1 <= n / 2 && cdf <= alpha / 2) {
    ++j;
    below = cdf;
    cdf += binomial_half_pmf(n, j);
  }
  if (j == 0) return {v.front(), v.back(), 1 - 2 * std::pow(0.5, static_cast<double>(n))};
  const double coverage = 1 - 2 * std::min(1.0, below);
  return {v[j - 1], v[n - j], coverage};
}

Speedup paired_speedup(const std::vector<double>& base, const std::vector<double>& other, double confidence) {
  if (base.size() != other.size()) throw std::invalid_argument("paired_speedup: the two samples differ in size");
  std::vector<double> ratios;
  ratios.reserve(base.size());
  for (size_t k = 0; k < base.size(); ++k)
    if (other[k] > 0) ratios.push_back(base[k] / other[k]);
  if (ratios.empty()) return {};
  return {median(ratios), median_ci(ratios, confidence)};
}

}  // namespace rlflow::bench
