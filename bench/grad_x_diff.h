// How far one path's grad_x is from another's: what `moegrad bench` checks
// each path against the fused one with, and what ab_compare reports between
// two builds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace moegrad::bench {

struct Diff {
  uint64_t differing = 0;   // elements whose bits differ
  bool identical = false;   // differing == 0
  double max_abs_diff = 0;  // +inf where a NaN shows up: the largest difference there can be
  double max_abs_ref = 0;
};

inline Diff compare(const float* out, const float* ref, size_t count) {
  Diff d;
  for (size_t i = 0; i < count; ++i) {
    d.differing += std::memcmp(&out[i], &ref[i], sizeof(float)) != 0;
    const double diff = std::fabs(static_cast<double>(out[i]) - static_cast<double>(ref[i]));
    d.max_abs_diff = std::max(d.max_abs_diff, std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff);
    d.max_abs_ref = std::max(d.max_abs_ref, std::fabs(static_cast<double>(ref[i])));
  }
  d.identical = d.differing == 0;
  return d;
}

}  // namespace moegrad::bench
