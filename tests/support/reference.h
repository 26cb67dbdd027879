// Independent references for grad-x:
//  * a float64 reference (value and sum of |terms|) for the SPEC §5 bound;
//  * the SPEC §5 contractual f32 order, computed here with std::fma, for
//    bitwise checks.
// Both decode the routing from expanded_row_idx by SPEC §3 (owners_from_index)
// and read the inputs through their strides.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "problem.h"

namespace mgt {

struct Reference64 {
  int64_t batch = 0, K = 0;
  std::vector<int64_t> tokens;  // the computed tokens, ascending
  std::vector<double> value;    // [tokens, K]
  std::vector<double> abs_sum;  // [tokens, K]: sum over terms of |grad_y * weight|
  std::vector<bool> has_rows;   // [tokens]: the token owns at least one expanded row
};

// tokens: the tokens to compute (empty: all).
Reference64 reference_f64(const Problem& p, const std::vector<int64_t>& tokens = {});

// grad_x in SPEC §5's order: c = fma chain over n from +0.0f, then
// ((0 + c_i1) + c_i2) + ... over the token's rows in ascending order; every
// NaN then becomes the canonical NaN 0x7fc00000 (README, "NaN").
Floats reference_contract_order(const Problem& p);

// grad_x in the fast bf16 mode's order (README, "Fast bf16 mode"): each
// row's sum over n is fast_bf16_chain's pair order, flushing as the
// instruction does; the rows are then added as in reference_contract_order
// (plain f32 adds, ascending), and NaNs stored canonical.
Floats reference_fast_bf16_order(const Problem& p);

// Elementwise |got - ref| <= (N + top_k) * (2^-24 * abs_sum + 2^-150) over
// computed tokens, and exactly +0.0f for tokens without rows.
::testing::AssertionResult within_bound(const Floats& got, const Reference64& ref, int64_t N,
                                        int64_t top_k, const std::string& context);

// got == ref (float64 compare) over computed tokens, and +0.0f for tokens without rows.
::testing::AssertionResult equals_reference(const Floats& got, const Reference64& ref,
                                            const std::string& context);

// memcmp of two [rows, K] results; the message names the first differing (b, k).
::testing::AssertionResult bitwise_equal(const Floats& got, const Floats& want, int64_t K,
                                         const std::string& context);

// A fixed sample of `count` tokens (always including the first and last).
std::vector<int64_t> sample_tokens(int64_t batch, int64_t count, uint64_t seed);

}  // namespace mgt
