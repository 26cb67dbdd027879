// Reproducible random inputs for `moegrad run`. Counter-based (splitmix64 of
// seed, stream and index), so any element can be drawn independently: the
// 880M-element default weight fills on all cores and is the same on every
// machine and core count.
#pragma once

#include <cstdint>

#include "float_formats.h"

namespace moegrad::cli {

// The inputs of `moegrad run`, `moegrad bench` and bench/ab_compare: grad_y
// and weight are independent draws (streams) under one seed, 42 unless
// `run --seed` says otherwise, so all of them measure the same data; the
// layer operators' x (ab_compare --op) is a third.
inline constexpr uint64_t kDefaultSeed = 42;
inline constexpr uint64_t kGradYStream = 1;
inline constexpr uint64_t kWeightStream = 2;
inline constexpr uint64_t kExpandedXStream = 3;

// splitmix64's output function over a (seed, stream, index) counter.
inline uint64_t random_u64(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = seed ^ (stream * 0xD1B54A32D192ED03ull);
  z += (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) on a 2^-23 grid, rounded to `format`, into `dst`.
void fill_uniform(void* dst, FloatFormat format, uint64_t count, uint64_t seed, uint64_t stream);

}  // namespace moegrad::cli
