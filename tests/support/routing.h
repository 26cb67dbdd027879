// Routing generator: builds an expanded_row_idx / group_list pair the way
// MoeInitRouting would (slots grouped by expert), with dropped slots, padding
// rows, empty experts and ignored tail entries, and records which token owns
// each expanded row as ground truth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgt {

struct RoutingSpec {
  int64_t batch = 1;
  int64_t top_k = 1;
  int64_t experts = 1;  // G
  int32_t row_idx_type = 0;
  // Fraction of routing slots kept; a dropped slot contributes nothing.
  double keep_ratio = 1.0;
  // A dropped slot still occupies an expanded row in its expert's group that
  // belongs to no token (type 0: idx -1, a padding row; type 1: a row no
  // position claims). Otherwise the row is removed and M shrinks.
  bool dropped_keep_row = false;
  // type 0: L = M + extra, the trailing entries hold in-range positions that
  // would change grad_x if they were (wrongly) used; type 1: L = batch*top_k
  // - extra, the cut positions' rows are left unclaimed.
  int64_t extra = 0;
  std::vector<int64_t> empty_experts;  // experts that receive no slot
  bool shuffle_within_expert = true;   // rows of one expert in random token order
  // A dropped slot's kept row goes before (even slots) or after (odd) all
  // of its expert's rows with tokens, as capacity padding (after any
  // shuffle), instead of at its slot's place among them.
  bool padding_at_ends = false;
  // Without the shuffle: these experts' rows in descending slot order.
  std::vector<int64_t> descending_experts;
  uint64_t seed = 1;
};

struct Routing {
  int64_t batch = 0, top_k = 0, experts = 0, M = 0;
  int32_t row_idx_type = 0;
  std::vector<int64_t> idx;     // expanded_row_idx, L entries
  std::vector<int64_t> counts;  // rows per expert, G entries
  std::vector<int64_t> owner;   // ground truth: token of expanded row i, or -1
  int64_t L() const { return static_cast<int64_t>(idx.size()); }
};

Routing make_routing(const RoutingSpec& spec);

// SPEC §3, implemented from the text: the token of each expanded row (-1: none).
// Values must be valid (in range or -1, no duplicate rows for type 1).
std::vector<int64_t> owners_from_index(const std::vector<int64_t>& idx, int32_t row_idx_type,
                                       int64_t M, int64_t top_k);

// For each token, its expanded rows in ascending order.
std::vector<std::vector<int64_t>> rows_of_tokens(const std::vector<int64_t>& owner, int64_t batch);

}  // namespace mgt
