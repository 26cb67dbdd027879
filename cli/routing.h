// A random top-k routing in the layout the operator consumes, built the way
// MoeInitRouting builds it: each token picks top_k distinct experts, and the
// expanded rows are the (token, slot) positions sorted stably by expert.
#pragma once

#include <cstdint>
#include <vector>

namespace moegrad::cli {

struct Routing {
  std::vector<int64_t> expanded_row_idx;  // [M] expanded row -> original position b*top_k+j
  std::vector<int64_t> group_list;        // [G] rows per expert (counts)
};

// Requires 1 <= top_k <= experts. Deterministic in `seed`.
Routing make_routing(int64_t batch, int64_t top_k, int64_t experts, uint64_t seed);

}  // namespace moegrad::cli
