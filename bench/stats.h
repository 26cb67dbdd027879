// Median, min and max of repeated measurements, and other quantiles.
#pragma once

#include <algorithm>
#include <vector>

namespace moegrad::bench {

struct Stats {
  double median = 0, min = 0, max = 0;
};

// The q-quantile (0 <= q <= 1) of `sorted` (ascending, not empty),
// interpolated linearly between the two samples around it: q = 0.5 is the
// median, the mean of the middle two for an even count.
inline double sorted_quantile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double f = at - static_cast<double>(lo);
  return sorted[lo] * (1 - f) + sorted[hi] * f;
}

// `samples` must not be empty.
inline Stats summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {sorted_quantile(samples, 0.5), samples.front(), samples.back()};
}

}  // namespace moegrad::bench
