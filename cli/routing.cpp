#include "routing.h"

#include <cstddef>
#include <new>
#include <string>

#include "cli_error.h"
#include "random_data.h"

namespace moegrad::cli {

namespace {

Routing build_routing(int64_t batch, int64_t top_k, int64_t experts, uint64_t seed) {
  constexpr uint64_t kRoutingStream = 0x524f555445ull;  // "ROUTE"
  const std::size_t tokens = static_cast<std::size_t>(batch);
  const std::size_t k = static_cast<std::size_t>(top_k);
  const std::size_t g_count = static_cast<std::size_t>(experts);

  std::vector<std::size_t> expert_of_position(tokens * k);
  // mark[g] == token + 1 <=> expert g is already taken by this token: an O(1)
  // membership test with no clearing between tokens.
  std::vector<std::size_t> mark(g_count, 0);
  uint64_t draw = 0;
  for (std::size_t b = 0; b < tokens; ++b) {
    // Floyd's algorithm: a uniform k-subset of the experts in k draws.
    for (std::size_t e = g_count - k, j = 0; e < g_count; ++e, ++j) {
      const std::size_t t = random_u64(seed, kRoutingStream, draw++) % (e + 1);
      const std::size_t pick = mark[t] == b + 1 ? e : t;
      mark[pick] = b + 1;
      expert_of_position[b * k + j] = pick;
    }
  }

  // Counting sort by expert; positions stay ascending within an expert.
  Routing r;
  r.group_list.assign(g_count, 0);
  for (const std::size_t g : expert_of_position) ++r.group_list[g];
  std::vector<int64_t> next(g_count, 0);
  for (std::size_t g = 1; g < g_count; ++g) next[g] = next[g - 1] + r.group_list[g - 1];
  r.expanded_row_idx.resize(expert_of_position.size());
  for (std::size_t p = 0; p < expert_of_position.size(); ++p) {
    r.expanded_row_idx[static_cast<std::size_t>(next[expert_of_position[p]]++)] =
        static_cast<int64_t>(p);
  }
  return r;
}

}  // namespace

Routing make_routing(int64_t batch, int64_t top_k, int64_t experts, uint64_t seed) {
  try {
    return build_routing(batch, top_k, experts, seed);
  } catch (const std::bad_alloc&) {
    // Its vectors are the first of a problem's buffers: say what did not
    // fit, as for the others (AlignedBuffer), not just "out of memory".
    // Two 8-byte tables per slot, three per expert (mark, counts, next).
    const uint64_t slots = static_cast<uint64_t>(batch) * static_cast<uint64_t>(top_k);
    const uint64_t bytes = 16 * slots + 24 * static_cast<uint64_t>(experts);
    data_error("out of memory: cannot allocate the routing of " + std::to_string(slots) + " slots to " +
               std::to_string(experts) + " experts (" + std::to_string(bytes) + " bytes)");
  }
}

}  // namespace moegrad::cli
