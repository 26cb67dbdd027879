// The plan: tiling, the work schedule and the workspace layout, all fixed
// before execution from the shape, the ISA's register tile and the thread
// count (seed §2.4). Nothing in it depends on index contents.
//
// Schedule. grad_x is split into disjoint work items: a range of tokens (a
// "chunk") x a range of grad_x columns (a "column block"). The item walks the
// expanded rows of its tokens in ascending order (grouped by expert, since
// experts own contiguous row ranges), computes up to `ms` rows at a time into
// its worker's ring slot, and immediately adds each finished row into grad_x.
// Because one item owns each grad_x element and walks rows in ascending order,
// grad_x[b, k] = ((0 + c_i1[k]) + c_i2[k]) + ... (SPEC §5) whatever thread runs
// it — no atomics, no locks, no dependence on the thread count.
//
// Workspace (offsets from a 512-byte aligned base, each region 512-aligned):
//   token_of_row  int32[M]                 expanded row -> token, -1 = none
//   row_starts    uint8[M]                 1 where a row is its token's first
//                                          (lowest) row: its add is 0 + c
//   token_has_rows uint8[batch]            1 where a token has any row
//   group_start   int64[G + 1]             first expanded row of each expert
//   token_runs    int64[2 G]               each expert's rows with tokens as
//                                          one run ascending by token, where
//                                          they are (driver/routing_table.h)
//   ring          workers x ms x nc f32    one C tile slot per worker (the
//                                          row-vector engine keeps it as its
//                                          transpose, nc x rowvec_ld(rows))
//   a_pack        workers x ms x kc        packed grad_y rows (widened to f32;
//                                          copied rows: x 272 instead of kc;
//                                          row-vector: x pack_span,
//                                          the most any slot packs; fast
//                                          bf16 pairs: half the words)
//   b_pack        workers x nc x kc        packed weight columns (row-vector
//                                          engine: two weight strips)
//   row_lists     workers x ms x 9 bytes   (row, token, starts) of the rows
//                                          in a slot
// plus 511 bytes so any workspace pointer can be aligned. Only the first
// three grow with M and the batch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/problem.h"
#include "common/workspace_align.h"
#include "kernels/gemm_kernels.h"
#include "plan/cache_sizes.h"
#include "plan/engine.h"

namespace moegrad::plan {

struct Region {
  size_t offset = 0;
  size_t bytes = 0;       // whole region
  size_t per_worker = 0;  // bytes per worker (512-multiple), 0 if shared
};

struct GradXPlan {
  const kernels::GemmKernels* kernels = nullptr;
  // Set when the row-vector engine runs the GEMM (ring slots then hold
  // transposed tiles, [nc][ms]); null for the classic packed engine.
  const kernels::RowvecKernels* rowvec = nullptr;
  // Workers the regions are placed for: the context's threads, at most
  // work_items() for the fused run (RegionsFor).
  int workers = 1;

  size_t ms = 0;  // rows per ring slot (multiple of MR, or of the row-vector panel)
  size_t nc = 0;  // columns per column block (multiple of NR, or of the strip)
  size_t kc = 0;  // reduction (N) block
  // Row-vector engine: the L2 floats a slot's Ct tile and its grad_y panels
  // share, and N rounded up to a multiple of kc; see pack_span().
  size_t span_budget = 0;
  size_t max_span = 0;

  int64_t col_blocks = 0;
  int64_t chunks = 0;
  int64_t tokens_per_chunk = 0;

  Region token_of_row, row_starts, token_has_rows, group_start, token_runs, ring, a_pack, b_pack, row_lists;
  size_t workspace_bytes = 0;  // including alignment slack

  int64_t work_items() const { return col_blocks * chunks; }

  // Row-vector engine: the reduction range (a multiple of kc, at most
  // max_span) whose grad_y panels are packed at once for a slot of `rows`
  // rows; each weight strip runs all of it before the next strip. kc on the
  // packed engine.
  size_t pack_span(size_t rows) const;
  // Row-vector engine: the leading dimension of a slot's Ct tile for `rows`
  // rows, whole panels: the tile is kept compact ([nc][rows rounded up],
  // within the slot's ms x nc), which is what pack_span() budgets for.
  size_t rowvec_ld(size_t rows) const;
  // Row-vector engine: the words a panel row takes for a span (a multiple
  // of kc), each kc block in whole words (RowvecKernels::words).
  size_t panel_words(size_t span) const;
};

// Whom the per-worker regions are for. The fused run gives each worker
// whole work items, so workers beyond work_items() would idle and their
// regions are not placed; the non-fused path splits the rows into its own,
// more numerous items and may keep every worker busy.
enum class RegionsFor { kFusedItems, kEveryWorker };

// Fails only on size overflow (status + message).
moegrad_status make_grad_x_plan(const GradXProblem& p, const kernels::GemmKernels& kernels, int workers,
                                Engine engine, const CacheSizes& caches, RegionsFor regions, GradXPlan* out);

}  // namespace moegrad::plan
