#include "routing.h"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace mgt {

Routing make_routing(const RoutingSpec& spec) {
  if (spec.batch <= 0 || spec.top_k <= 0 || spec.experts <= 0)
    throw std::invalid_argument("make_routing: batch, top_k and experts must be > 0");
  std::mt19937_64 rng(spec.seed);
  std::bernoulli_distribution keep(spec.keep_ratio);

  std::vector<int64_t> allowed;
  for (int64_t g = 0; g < spec.experts; ++g)
    if (std::find(spec.empty_experts.begin(), spec.empty_experts.end(), g) == spec.empty_experts.end())
      allowed.push_back(g);
  if (allowed.empty()) throw std::invalid_argument("make_routing: every expert is empty");
  const auto allowed_count = static_cast<int64_t>(allowed.size());

  // rows_of_expert[g]: original positions (or -1 for an ownerless row).
  std::vector<std::vector<int64_t>> rows_of_expert(static_cast<size_t>(spec.experts));
  std::vector<int64_t> choice(allowed);
  for (int64_t b = 0; b < spec.batch; ++b) {
    // top_k distinct experts when possible (a partial Fisher-Yates), else with repeats.
    for (int64_t j = 0; j < spec.top_k; ++j) {
      int64_t expert;
      if (spec.top_k <= allowed_count) {
        std::uniform_int_distribution<int64_t> pick(j, allowed_count - 1);
        std::swap(choice[static_cast<size_t>(j)], choice[static_cast<size_t>(pick(rng))]);
        expert = choice[static_cast<size_t>(j)];
      } else {
        std::uniform_int_distribution<int64_t> pick(0, allowed_count - 1);
        expert = allowed[static_cast<size_t>(pick(rng))];
      }
      const int64_t p = b * spec.top_k + j;
      const bool kept = spec.keep_ratio >= 1.0 || keep(rng);
      if (kept)
        rows_of_expert[static_cast<size_t>(expert)].push_back(p);
      else if (spec.dropped_keep_row)
        rows_of_expert[static_cast<size_t>(expert)].push_back(spec.padding_at_ends ? -2 - (p % 2) : -1);
    }
  }

  Routing r;
  r.batch = spec.batch;
  r.top_k = spec.top_k;
  r.experts = spec.experts;
  r.row_idx_type = spec.row_idx_type;
  std::vector<int64_t> position_of_row;  // original position of each expanded row, or -1
  for (size_t g = 0; g < rows_of_expert.size(); ++g) {
    auto& rows = rows_of_expert[g];
    if (spec.shuffle_within_expert) std::shuffle(rows.begin(), rows.end(), rng);
    // Padding marked -2 (even slot) goes first, -3 (odd) last, both as -1.
    const auto first_owned = std::stable_partition(rows.begin(), rows.end(), [](int64_t v) { return v == -2; });
    std::stable_partition(first_owned, rows.end(), [](int64_t v) { return v != -3; });
    std::replace_if(rows.begin(), rows.end(), [](int64_t v) { return v < 0; }, int64_t{-1});
    if (!spec.shuffle_within_expert && std::count(spec.descending_experts.begin(), spec.descending_experts.end(),
                                                  static_cast<int64_t>(g)) > 0)
      std::reverse(rows.begin(), rows.end());
    r.counts.push_back(static_cast<int64_t>(rows.size()));
    position_of_row.insert(position_of_row.end(), rows.begin(), rows.end());
  }
  r.M = static_cast<int64_t>(position_of_row.size());
  r.owner.resize(position_of_row.size());
  for (size_t i = 0; i < position_of_row.size(); ++i)
    r.owner[i] = position_of_row[i] < 0 ? -1 : position_of_row[i] / spec.top_k;

  const int64_t slots = spec.batch * spec.top_k;
  if (spec.row_idx_type == 0) {
    r.idx = position_of_row;
    std::uniform_int_distribution<int64_t> any_slot(0, slots - 1);
    for (int64_t e = 0; e < spec.extra; ++e) r.idx.push_back(any_slot(rng));
  } else {
    if (spec.extra > slots) throw std::invalid_argument("make_routing: extra > batch*top_k");
    r.idx.assign(static_cast<size_t>(slots), -1);
    for (int64_t i = 0; i < r.M; ++i) {
      const int64_t p = position_of_row[static_cast<size_t>(i)];
      if (p >= 0) r.idx[static_cast<size_t>(p)] = i;
    }
    for (int64_t p = slots - spec.extra; p < slots; ++p) {
      const int64_t row = r.idx[static_cast<size_t>(p)];
      if (row >= 0) r.owner[static_cast<size_t>(row)] = -1;  // its position is cut off
    }
    r.idx.resize(static_cast<size_t>(slots - spec.extra));
  }
  return r;
}

std::vector<int64_t> owners_from_index(const std::vector<int64_t>& idx, int32_t row_idx_type,
                                       int64_t M, int64_t top_k) {
  std::vector<int64_t> owner(static_cast<size_t>(M), -1);
  if (row_idx_type == 0) {
    // idx[i] (i < M) is the original position of expanded row i; -1 pads.
    for (int64_t i = 0; i < M; ++i) {
      const int64_t v = idx.at(static_cast<size_t>(i));
      if (v != -1) owner[static_cast<size_t>(i)] = v / top_k;
    }
  } else {
    // idx[p] is the expanded row of original position p; -1 drops.
    for (size_t p = 0; p < idx.size(); ++p) {
      const int64_t e = idx[p];
      if (e == -1) continue;
      if (e < 0 || e >= M || owner[static_cast<size_t>(e)] != -1)
        throw std::invalid_argument("owners_from_index: invalid type-1 index");
      owner[static_cast<size_t>(e)] = static_cast<int64_t>(p) / top_k;
    }
  }
  return owner;
}

std::vector<std::vector<int64_t>> rows_of_tokens(const std::vector<int64_t>& owner, int64_t batch) {
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(batch));
  for (size_t i = 0; i < owner.size(); ++i)
    if (owner[i] >= 0) rows.at(static_cast<size_t>(owner[i])).push_back(static_cast<int64_t>(i));
  return rows;
}

}  // namespace mgt
