#include "rlflow/bench/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace rlflow::bench {

namespace {

// P(B <= k) for B ~ Binomial(n, 1/2), summed in log space so large n does not underflow.
double binomial_half_cdf(size_t n, size_t k) {
  const double log_half_n = static_cast<double>(n) * std::log(0.5);
  double sum = 0;
  for (size_t i = 0; i <= k && i <= n; ++i)
    sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(static_cast<double>(n - i) + 1.0) + log_half_n);
  return std::min(1.0, sum);
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
  // j (1-based) = the largest with P(B <= j - 1) <= alpha / 2; then [x_(j), x_(n+1-j)].
  size_t j = 0;
  while (j + 1 <= n / 2 && binomial_half_cdf(n, j) <= alpha / 2) ++j;
  if (j == 0) return {v.front(), v.back(), 1 - 2 * std::pow(0.5, static_cast<double>(n))};
  const double coverage = 1 - 2 * binomial_half_cdf(n, j - 1);
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
