// Median, min and max of repeated measurements.
#pragma once

#include <algorithm>
#include <vector>

namespace moegrad::bench {

struct Stats {
  double median = 0, min = 0, max = 0;
};

// `samples` must not be empty.
inline Stats summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t h = samples.size() / 2;
  const double med = samples.size() % 2 ? samples[h] : 0.5 * (samples[h - 1] + samples[h]);
  return {med, samples.front(), samples.back()};
}

}  // namespace moegrad::bench
