#include "plan/grad_x_plan.h"

#include <algorithm>
#include <cinttypes>

#include "api/error.h"

namespace moegrad::plan {
namespace {

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// Appends a region to the layout; false on overflow.
bool place(size_t* cursor, size_t per_worker_bytes, int workers, Region* r) {
  r->per_worker = round_up(per_worker_bytes, kWorkspaceAlign);
  size_t total = 0;
  if (__builtin_mul_overflow(r->per_worker, static_cast<size_t>(workers), &total)) return false;
  r->offset = *cursor;
  r->bytes = total;
  return !__builtin_add_overflow(*cursor, total, cursor);
}

bool place_shared(size_t* cursor, size_t bytes, Region* r) {
  r->offset = *cursor;
  r->bytes = round_up(bytes, kWorkspaceAlign);
  r->per_worker = 0;
  return r->bytes >= bytes && !__builtin_add_overflow(*cursor, r->bytes, cursor);
}

// Up to this many rows per expert (on average) the row-vector engine wins:
// the packed engine transposes every weight element once per slot, which
// its rows' GEMM cannot hide when they are few (zmoe: ~137 rows, 10-20%
// of the time), while the row-vector engine only copies weights. With many
// rows per expert (large-token: ~3700, K = 128) the transpose is amortised
// and the packed engine's tiles fit K exactly (measured: 0.91-0.96x the
// packed engine's time at 64-256 rows, 1.0x at 1024, 1.09x on large-token).
constexpr int64_t kRowvecMaxRowsPerExpert = 1024;

// The row-vector engine (driver/rowvec_gemm.h) needs contiguous reductions
// and grad_x rows.
bool use_rowvec(const GradXProblem& p, const kernels::GemmKernels& k, Engine engine) {
  if (k.rowvec == nullptr || p.gy_col != 1 || p.w_n != 1 || p.gx_col != 1) return false;
  switch (engine) {
    case Engine::kPacked: return false;
    case Engine::kRowvec: return true;
    case Engine::kAuto: break;
  }
  return p.M <= kRowvecMaxRowsPerExpert * std::max<int64_t>(p.G, 1);
}

}  // namespace

moegrad_status make_grad_x_plan(const GradXProblem& p, const kernels::GemmKernels& k, int workers,
                                Engine engine, GradXPlan* out) {
  GradXPlan plan;
  plan.kernels = &k;
  plan.workers = std::max(workers, 1);

  // Blocking (seed §2.4.4: baseM/baseN/baseK, here ms/nc/kc).
  //
  // kc = 256: the B micro-panel (kc x NR) stays in L1 across a column of
  // micro-kernel calls. Even, so fast-bf16 pairs never straddle blocks.
  //
  // nc: every column block re-packs the slot's grad_y rows, so wider blocks
  // pack less; but the blocks are also the unit of parallelism. Aim for 2
  // blocks per worker (4 measured 1.02-1.04x the time on fine-grained with
  // 2 threads), never narrower than 256 columns (below that the packing of
  // grad_y dominates and splitting tokens is cheaper) nor wider than 512
  // (the weight panel or strip rows must stay in L2).
  const size_t N = static_cast<size_t>(p.N), K = static_cast<size_t>(p.K);
  plan.rowvec = use_rowvec(p, k, engine) ? k.rowvec : nullptr;
  // Granularity of slot rows and grad_x columns: the engine's register tile.
  const size_t row_unit = plan.rowvec ? plan.rowvec->panel : k.mr;
  const size_t col_unit = plan.rowvec ? plan.rowvec->strip : k.nr;
  // One worker needs no split at all: every extra item repacks panels.
  const int64_t want_items = plan.workers == 1 ? 1 : 2 * static_cast<int64_t>(plan.workers);
  plan.kc = std::min<size_t>(N, 256);
  if (plan.rowvec) plan.kc = std::min(plan.kc, plan.rowvec->max_kc);  // what a strip row holds
  const size_t per_item = (K + static_cast<size_t>(want_items) - 1) / static_cast<size_t>(want_items);
  plan.nc = std::clamp(round_up(per_item, col_unit), std::min(round_up(K, col_unit), round_up(256, col_unit)),
                       std::min(round_up(K, col_unit), round_up(512, col_unit)));
  plan.col_blocks = static_cast<int64_t>((K + plan.nc - 1) / plan.nc);

  // Too few column blocks for the workers: split the tokens into chunks.
  // Only then: a column block of grad_x larger than the last-level cache
  // costs less than the extra chunks would (each packs its experts' weights
  // again; the scatter-add's look-ahead hides grad_x's DRAM latency).
  // Measured: large-token without an 8 MiB cap per chunk 0.96x the time,
  // at 4x its batch 0.94x.
  plan.chunks = plan.col_blocks >= want_items ? 1 : (want_items + plan.col_blocks - 1) / plan.col_blocks;
  // A few items should share out evenly: 7 items on 2 workers take as long
  // as 8.
  const int64_t w = plan.workers;
  while (plan.col_blocks * plan.chunks < 4 * w && (plan.col_blocks * plan.chunks) % w != 0) ++plan.chunks;
  plan.chunks = std::min<int64_t>(plan.chunks, p.batch);
  plan.tokens_per_chunk = (p.batch + plan.chunks - 1) / plan.chunks;
  plan.chunks = (p.batch + plan.tokens_per_chunk - 1) / plan.tokens_per_chunk;

  // ms: room for twice the average rows an expert has in a chunk, so an
  // expert rarely needs a second slot (which would pack its weights again),
  // at most 240 rows rounded up to the engine's unit (252 or 256: the slot,
  // ms x nc, then fits in L2 beside the panels).
  const int64_t avg_rows = p.G > 0 ? (p.M + p.G * plan.chunks - 1) / (p.G * plan.chunks) : 0;
  plan.ms = std::clamp(round_up(static_cast<size_t>(2 * avg_rows), row_unit), row_unit, round_up(240, row_unit));

  // ms and nc are multiples of the engine's units, so panels need no padding.
  size_t cursor = 0;
  size_t table_bytes = 0;
  bool ok = !__builtin_mul_overflow(static_cast<size_t>(p.M), sizeof(int32_t), &table_bytes) &&
            place_shared(&cursor, table_bytes, &plan.token_of_row) &&
            place_shared(&cursor, (static_cast<size_t>(p.G) + 1) * sizeof(int64_t), &plan.group_start) &&
            place(&cursor, plan.ms * plan.nc * sizeof(float), plan.workers, &plan.ring) &&
            place(&cursor, kernels::a_pack_floats(k, plan.ms, plan.kc) * sizeof(float), plan.workers, &plan.a_pack) &&
            place(&cursor, (plan.rowvec ? plan.rowvec->strip_floats : plan.nc * plan.kc) * sizeof(float),
                  plan.workers, &plan.b_pack) &&
            place(&cursor, plan.ms * 2 * sizeof(int32_t), plan.workers, &plan.row_lists) &&
            !__builtin_add_overflow(cursor, kWorkspaceAlign - 1, &plan.workspace_bytes);
  if (!ok)
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "workspace size overflows size_t (M=%" PRId64 ", G=%" PRId64 ")",
                p.M, p.G);
  *out = plan;
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad::plan
