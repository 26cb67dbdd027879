// Checks grad_x against a float64 reference on a sample of tokens, with the
// accuracy bound of SPEC 5: |grad_x - ref| <= (N + top_k) * (2^-24 *
// sum|terms| + 2^-150), the 2^-150 for roundings to a subnormal result (the
// README's "Determinism and precision").
// Computed here, from the raw inputs, by code that shares nothing with the
// library's kernels.
#pragma once

#include <cstdint>

#include "float_formats.h"

namespace moegrad::cli {

struct ReferenceProblem {
  const void* grad_y;  // [M, N] row-major
  const void* weight;  // [G, K, N] row-major
  FloatFormat format;
  const int64_t* expanded_row_idx;  // [M], expanded -> original (row_idx_type 0, no padding)
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
