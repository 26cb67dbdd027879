#include "driver/routing_table.h"

#include <algorithm>
#include <cinttypes>

#include "common/error.h"

namespace moegrad::driver {

moegrad_status build_group_start(const IndexView& gl, int32_t group_list_type, int64_t M, const char* rows,
                                 int64_t* group_start) {
  const int64_t G = gl.length;
  group_start[0] = 0;
  if (group_list_type == MOEGRAD_GROUP_LIST_COUNT) {
    // Negative counts first: a later negative count may bring a sum that
    // ran past M back to it ([9, -5] with M = 4), and then the only broken
    // rule is the sign. Each count is read once, kept in group_start until
    // the sums replace it: read again, a count another thread wrote
    // between the two loops would escape the sign check ([-1, 3] with
    // M = 2 sums to M and starts a group at row -1).
    for (int64_t g = 0; g < G; ++g) {
      const int64_t count = gl.at(g);
      if (count < 0)
        return fail(MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT, "group_list[%" PRId64 "]=%" PRId64 " is negative", g, count);
      group_start[g + 1] = count;
    }
    int64_t sum = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t count = group_start[g + 1];
      if (count > M - sum)  // also rules out overflow of the running sum
        return fail(MOEGRAD_STATUS_GROUP_SUM_MISMATCH,
                    "group counts exceed M=%" PRId64 " at group_list[%" PRId64 "]=%" PRId64 " (running sum %" PRId64 ")",
                    M, g, count, sum);
      sum += count;
      group_start[g + 1] = sum;
    }
    if (sum != M)
      return fail(MOEGRAD_STATUS_GROUP_SUM_MISMATCH, "group_list counts sum to %" PRId64 " but M=%" PRId64 " (%s rows)",
                  sum, M, rows);
    return MOEGRAD_STATUS_SUCCESS;
  }
  int64_t prev = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t end = gl.at(g);
    if (g == 0 && end < 0)
      return fail(MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT, "cumsum group_list[0]=%" PRId64 " is negative", end);
    if (end < prev)
      return fail(MOEGRAD_STATUS_CUMSUM_DECREASING, "cumsum group_list[%" PRId64 "]=%" PRId64 " < group_list[%" PRId64
                  "]=%" PRId64, g, end, g - 1, prev);
    group_start[g + 1] = end;
    prev = end;
  }
  if (prev != M)
    return fail(MOEGRAD_STATUS_GROUP_SUM_MISMATCH, "cumsum group_list ends at %" PRId64 " but M=%" PRId64 " (%s rows)",
                prev, M, rows);
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status build_token_of_row(const GradXProblem& p, int32_t* token_of_row) {
  const IndexView& idx = p.row_idx;
  const int64_t slots = p.batch * p.top_k;  // validated not to overflow
  if (p.row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL) {
    for (int64_t i = 0; i < p.M; ++i) {
      const int64_t v = idx.at(i);
      if (v == -1) {
        token_of_row[i] = -1;
        continue;
      }
      if (v < 0 || v >= slots)
        return fail(MOEGRAD_STATUS_INDEX_OUT_OF_RANGE,
                    "expanded_row_idx[%" PRId64 "]=%" PRId64 " (row_idx_type 0) is not -1 and not in [0, batch*top_k=%" PRId64 ")",
                    i, v, slots);
      token_of_row[i] = static_cast<int32_t>(v / p.top_k);
    }
    return MOEGRAD_STATUS_SUCCESS;
  }
  for (int64_t i = 0; i < p.M; ++i) token_of_row[i] = -1;
  for (int64_t pos = 0; pos < idx.length; ++pos) {
    const int64_t e = idx.at(pos);
    if (e == -1) continue;
    if (e < 0 || e >= p.M)
      return fail(MOEGRAD_STATUS_INDEX_OUT_OF_RANGE,
                  "expanded_row_idx[%" PRId64 "]=%" PRId64 " (row_idx_type 1) is not -1 and not in [0, M=%" PRId64 ")",
                  pos, e, p.M);
    if (token_of_row[e] != -1)
      return fail(MOEGRAD_STATUS_DUPLICATE_INDEX,
                  "expanded row %" PRId64 " is claimed twice (again by expanded_row_idx[%" PRId64 "], row_idx_type 1)", e, pos);
    token_of_row[e] = static_cast<int32_t>(pos / p.top_k);
  }
  return MOEGRAD_STATUS_SUCCESS;
}

void mark_token_starts(const GradXProblem& p, const int32_t* token_of_row, uint8_t* row_starts,
                       uint8_t* token_has_rows) {
  std::fill_n(token_has_rows, p.batch, uint8_t{0});
  for (int64_t i = 0; i < p.M; ++i) {
    const int32_t b = token_of_row[i];
    row_starts[i] = b >= 0 && token_has_rows[b] == 0;
    if (b >= 0) token_has_rows[b] = 1;
  }
}

void find_token_runs(const int64_t* group_start, int64_t G, const int32_t* token_of_row, int64_t* token_runs) {
  for (int64_t g = 0; g < G; ++g) {
    int64_t first = group_start[g], end = group_start[g + 1];
    while (first < end && token_of_row[first] < 0) ++first;
    while (end > first && token_of_row[end - 1] < 0) --end;
    // A row without a token (-1) between them breaks the order.
    bool ascending = true;
    for (int64_t i = first + 1; i < end && ascending; ++i) ascending = token_of_row[i] >= token_of_row[i - 1];
    token_runs[2 * g] = ascending ? first : -1;
    token_runs[2 * g + 1] = ascending ? end : -1;
  }
}

}  // namespace moegrad::driver
