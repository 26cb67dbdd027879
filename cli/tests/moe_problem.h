// A tiny MoE grad-x problem with small-integer inputs, so every product and
// sum is exact in float32 and the expected grad_x is known exactly (computed
// here in double, independently of moegrad). It exercises dropped slots,
// padding rows, an empty expert and a token with no rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moegrad::cli_test {

struct MoeProblem {
  int64_t batch, top_k, experts, k, n;
  std::vector<int64_t> position_of_row;  // [M] original position b*top_k+j, -1 = padding
  std::vector<int64_t> expert_of_row;    // [M]
  std::vector<int64_t> counts;           // [G]
  std::vector<int> grad_y;               // [M, N] in [-3, 3]
  std::vector<int> weight;               // [G, K, N] in [-3, 3]

  int64_t m() const { return static_cast<int64_t>(position_of_row.size()); }
  // Index for --row-idx-type 0 (length M + 2: entries past M must be ignored).
  std::vector<int64_t> row_idx_type0() const;
  // Index for --row-idx-type 1 (length batch*top_k, -1 for dropped slots).
  std::vector<int64_t> row_idx_type1() const;
  std::vector<int64_t> cumsum() const;
  // [batch, K], exact.
  std::vector<float> expected_grad_x() const;
};

// Deterministic in `seed`. Slot p is dropped when p % 7 == 3, and every slot
// of the last token (which must come out as exact zeros); one padding row
// joins expert 1; the last expert gets no rows. Needs experts >= 3.
MoeProblem make_problem(int64_t batch, int64_t top_k, int64_t experts, int64_t k, int64_t n,
                        uint64_t seed);

}  // namespace moegrad::cli_test
