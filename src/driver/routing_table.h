// Routing phase of a run (seed: VectorCalcOriExpandedRowIdx): checks the
// contents of group_list and expanded_row_idx (SPEC §4.6, §4.8) and inverts
// the routing into workspace tables. Runs before grad_x is touched, so a bad
// index leaves grad_x unwritten.
#pragma once

#include <cstdint>

#include "common/problem.h"
#include "moegrad/moegrad.h"

namespace moegrad::driver {

// group_start[G + 1], G = group_list.length: expert g owns expanded rows
// [group_start[g], group_start[g+1]), which must end at M; `rows` names the
// tensor whose row count M is ("grad_y"; the layer operators' "x"). Also
// what the layer operators decode their group lists with (SPEC §4.6).
moegrad_status build_group_start(const IndexView& group_list, int32_t group_list_type, int64_t M, const char* rows,
                                 int64_t* group_start);

// token_of_row[M]: the token b = p / top_k of each expanded row, -1 for rows
// that belong to no token (type 0 padding, type 1 unclaimed rows).
moegrad_status build_token_of_row(const GradXProblem& p, int32_t* token_of_row);

// row_starts[M]: 1 where row i is the lowest row of its token, whose add
// into grad_x is SPEC §5's first, 0 + c, so it needs no grad_x read and no
// zeroed grad_x before it; token_has_rows[batch]: 1 where a token has a row
// (the others' grad_x rows are zero).
void mark_token_starts(const GradXProblem& p, const int32_t* token_of_row, uint8_t* row_starts,
                       uint8_t* token_has_rows);

// token_runs[2 G]: for expert g, rows [token_runs[2g], token_runs[2g+1])
// hold all of g's rows that have a token, every row between them has one,
// and their tokens do not decrease, as MoeInitRouting leaves them (padding
// only before or after them). Then the rows of a range of tokens are one
// run that a binary search finds, and an item walks only those. Scanning
// every row cost each item O(M): large-token on 64 workers (time-sliced on
// a 2-core Zen 5, 64 token chunks) took 0.88x the time with the search; 2
// workers 1.00x, zmoe 1.00x, fine-grained 1.00-1.03x (one chunk, the same
// rows: code placement, by docs/performance-history.md). Both are -1 where g's
// rows are not so ordered: such an expert is scanned.
void find_token_runs(const int64_t* group_start, int64_t G, const int32_t* token_of_row, int64_t* token_runs);

}  // namespace moegrad::driver
