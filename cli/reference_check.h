// Checks grad_x against a float64 reference on a sample of tokens, with the
// accuracy bound of SPEC 5: |grad_x - ref| <= (N + top_k) * (2^-24 *
// sum|terms| + 2^-150), the 2^-150 for roundings to a subnormal result (the
// README's "Determinism and precision").
// Computed here, from the raw inputs, by code that shares nothing with the
// library's kernels.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "float_formats.h"

namespace moegrad::cli {

// Tokens `moegrad run` and `moegrad bench` check: each costs top_k * K * N
// float64 multiply-adds (0.2 s for `run`'s default shape).
inline constexpr int64_t kReferenceTokens = 16;

// SPEC 5's bound for one f32 value made by `roundings` roundings of sums
// whose terms' magnitudes add up to abs_sum: each errs by at most 2^-24 of
// its result or, where that is subnormal, by at most 2^-150.
inline double error_bound(double roundings, double abs_sum) {
  return roundings * (std::ldexp(abs_sum, -24) + std::ldexp(1.0, -150));
}

// err as a fraction of bound: 0 without error, +inf for a NaN (err is NaN)
// or for any error where the bound is 0.
inline double error_over_bound(double err, double bound) {
  if (err == 0) return 0;
  return std::isnan(err) || bound == 0 ? std::numeric_limits<double>::infinity() : err / bound;
}

// Calls fn(widen), widen(data, i) giving element i of a buffer in `format`
// exactly as a double (f16 through a table: a load per element instead of
// a conversion), and returns what fn returns. The conversions are the
// CLI's own (float_formats.h).
template <class Fn>
decltype(auto) with_widening(FloatFormat format, Fn fn) {
  switch (format) {
    case FloatFormat::kF16: {
      std::vector<float> table(65536);
      for (uint32_t h = 0; h < 65536; ++h) table[h] = f16_bits_to_f32(static_cast<uint16_t>(h));
      return fn([t = table.data()](const void* d, std::size_t i) {
        return double{t[static_cast<const uint16_t*>(d)[i]]};
      });
    }
    case FloatFormat::kBF16:
      return fn([](const void* d, std::size_t i) { return double{bf16_bits_to_f32(static_cast<const uint16_t*>(d)[i])}; });
    case FloatFormat::kF32:
      break;
  }
  return fn([](const void* d, std::size_t i) { return double{static_cast<const float*>(d)[i]}; });
}

struct ReferenceProblem {
  const void* grad_y;  // [M, N] row-major
  const void* weight;  // [G, K, N] row-major
  FloatFormat format;
  const int64_t* expanded_row_idx;  // [M], expanded -> original (row_idx_type 0; -1: padding, skipped)
  const int64_t* group_list;        // [G] counts
  int64_t batch, top_k, experts, k, n, m;
};

struct ReferenceCheck {
  int64_t tokens = 0;               // how many tokens were checked (all K columns each)
  double max_abs_error = 0;         // max |grad_x - ref|
  double max_error_over_bound = 0;  // max |grad_x - ref| / bound; <= 1 passes
  bool within_bound = true;
};

// Checks up to `max_tokens` tokens spread evenly over the batch (first and
// last included). A NaN in grad_x fails the check.
ReferenceCheck check_against_float64(const ReferenceProblem& p, const float* grad_x,
                                     int64_t max_tokens);

}  // namespace moegrad::cli
