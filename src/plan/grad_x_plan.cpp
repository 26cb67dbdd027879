#include "plan/grad_x_plan.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <utility>

#include "common/error.h"

namespace moegrad::plan {
namespace {

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }
size_t round_down(size_t x, size_t m) { return x / m * m; }
size_t round_nearest(size_t x, size_t m) { return (x + m / 2) / m * m; }

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
// packed engine's time at 64-256 rows, 1.0x at 1024, 1.09x on large-token;
// AVX2 on the same machine: 0.94-0.95x with 1 thread on fine-grained and
// zmoe, 0.95-0.98x with 2; 0.95x at 512 rows, 0.97x at 1024).
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

// Token chunks for `blocks` column blocks: enough for `want_items` items,
// then a few more while that shares out unevenly (7 items on 2 workers take
// as long as 8); no more than the batch has tokens, all of equal size but
// the last.
int64_t chunks_for(int64_t want_items, int64_t blocks, int64_t workers, int64_t batch) {
  int64_t chunks = (want_items + blocks - 1) / blocks;
  while (blocks * chunks < 4 * workers && (blocks * chunks) % workers != 0) ++chunks;
  chunks = std::min(chunks, batch);  // batch >= 1 (validated)
  const int64_t tokens_per_chunk = (batch + chunks - 1) / chunks;
  return (batch + tokens_per_chunk - 1) / tokens_per_chunk;
}

// A grad_y element packed costs about twice a weight element read (one
// thread of the 2-core Zen 4, 4096 tokens x 8 of 256 experts, K = N = 512:
// twice the column blocks took +0.36 ns per element packed, twice the
// chunks +0.19 ns per weight element, DRAM's pace). With less DRAM
// bandwidth per core, as on machines with many, weights cost more; the
// factor then errs towards chunks, which the plan chose before it had a
// cost.
constexpr double kPackPerWeightRead = 2;

// Column blocks are never narrowed below this many columns: every block
// packs each of its slots' grad_y rows again, which split_cost counts, and
// scatters rows of this length, which it does not.
constexpr size_t kNarrowestBlock = 64;

// The cost of splitting into `blocks` column blocks x `chunks` token
// chunks, in weight elements read. An item visits, expert by expert, the
// experts its chunk's tokens use; each visit reads that expert's weights
// for the block's columns (all blocks together: K x N) and packs the
// visit's grad_y rows, in whole panels of `row_unit` rows, once per block
// (N each). The plan may not look at the indices, so rows are taken as
// routed uniformly: an expert has none of a chunk's M / chunks rows with
// probability exp(-M / (chunks x G)). Chunks pay where experts have many
// rows (large-token: ~3700 rows, K = 128); narrower blocks where they have
// few, since then every chunk reads nearly every expert's weights again.
double split_cost(const GradXProblem& p, size_t blocks, int64_t chunks, size_t row_unit) {
  const double M = static_cast<double>(p.M), G = static_cast<double>(std::max<int64_t>(p.G, 1));
  const double C = static_cast<double>(chunks), N = static_cast<double>(p.N), unit = static_cast<double>(row_unit);
  const double visits = C * G * -std::expm1(-M / (C * G));
  if (visits <= 0) return 0;
  const double packed_rows = visits * std::ceil(M / visits / unit) * unit;
  return kPackPerWeightRead * static_cast<double>(blocks) * packed_rows * N +
         visits * static_cast<double>(p.K) * N;
}

}  // namespace

moegrad_status make_grad_x_plan(const GradXProblem& p, const kernels::GemmKernels& k, int workers,
                                Engine engine, const CacheSizes& caches, RegionsFor regions, GradXPlan* out) {
  GradXPlan plan;
  plan.kernels = &k;
  plan.workers = std::max(workers, 1);

  // Blocking (seed §2.4.4: baseM/baseN/baseK, here ms/nc/kc), fitted to the
  // data caches. With 48 KiB of L1 and 1 MiB of L2 (where it was measured)
  // this gives kc 256, nc at most 512 (1036 on the row-vector engine, in
  // 14-column strips) and ms at most 256 (252 in 14-row tiles; 160 on the
  // row-vector engine). Smaller caches shrink the blocks; larger ones do
  // not grow them: on a Xeon with 2 MiB of L2, blocks fitted to it (twice
  // the columns and taller slots) took 1.01-1.07x the time of the 1 MiB ones.
  const CacheSizes fit{std::min(caches.l1d, CacheSizes{}.l1d), std::min(caches.l2, CacheSizes{}.l2)};
  const size_t N = static_cast<size_t>(p.N), K = static_cast<size_t>(p.K);
  plan.rowvec = use_rowvec(p, k, engine) ? k.rowvec : nullptr;
  // Granularity of slot rows and grad_x columns: the engine's register tile.
  const size_t row_unit = plan.rowvec ? plan.rowvec->panel : k.mr;
  const size_t col_unit = plan.rowvec ? plan.rowvec->strip : k.nr;
  // One worker needs no split at all: every extra item repacks panels.
  const int64_t want_items = plan.workers == 1 ? 1 : 2 * static_cast<int64_t>(plan.workers);

  // kc: the block a micro-kernel call reduces over. Only the operand that
  // every call of a block reuses has to stay in the L1; the other is read
  // once per call and streams from L2. The packed engine's reused operand,
  // the B micro-panel (kc x NR f32), may fill the L1 while its A
  // micro-panels stream past (on a Zen 4 with a 32 KiB L1d that gives kc
  // 256 instead of 160 when A had to fit too: large-token's N = 256 is then
  // one block, whose packed weights the next slot of the same expert reuses;
  // 0.95-0.97x the time with one thread, every dtype and the fast bf16
  // mode, 0.83-0.89x with two). The row-vector engine's weight strip
  // (STRIP x kc) stays in half the L1; its grad_y panel is read in address
  // order, which the hardware prefetcher follows (there too kc 256 instead
  // of 160: 0.95x and 0.97x the time on zmoe, 0.90x and 0.98x on
  // fine-grained, one thread, f32). With 48 KiB every rule gives 256. At
  // most 256 words; a multiple of 32, so fast-bf16 pairs never straddle
  // blocks. The fast bf16 mode's row-vector strips and panels hold two
  // elements a word, so it reduces twice as far in the same bytes: half the
  // kernel calls and Ct tile loads and stores (kc 512 against 256 on that
  // Zen 4: zmoe 0.96-0.97x the time with one thread, 0.96-0.99x with two;
  // fine-grained 0.99-1.01x).
  const size_t per_word = plan.rowvec ? plan.rowvec->per_word : 1;
  const size_t kc_l1 = plan.rowvec ? round_down(per_word * fit.l1d / 2 / (sizeof(float) * col_unit), 32)
                                   : round_down(fit.l1d / (sizeof(float) * col_unit), 32);
  size_t kc_max = std::clamp<size_t>(kc_l1, 32, 256 * per_word);
  if (plan.rowvec) kc_max = std::min(kc_max, plan.rowvec->max_kc);  // what a strip row holds
  plan.kc = std::min(N, kc_max);
  // The words one row takes in a packed block of kc_max (cache budgets).
  const size_t kc_words = plan.rowvec ? plan.rowvec->words(kc_max) : kc_max;

  // nc: every column block re-packs the slot's grad_y rows, so wider blocks
  // pack less; but the blocks are also the unit of parallelism. Aim for 2
  // blocks per worker (4 measured 1.02-1.04x the time on fine-grained with
  // 2 threads), at first never more blocks than 256-column ones would need
  // (narrower, the packing of grad_y dominates, unless tokens split into
  // chunks would read the weights again: split_cost below) nor wider than
  // the L2 allows: the packed engine keeps a weight panel
  // (nc x kc f32) in half of it; the row-vector engine keeps no weight panel
  // there (its strips live in L1), only the slot and the panels, so it
  // takes twice the columns (measured with the rule below: zmoe f32 0.98x /
  // 0.96x the time with 1 / 2 threads, fast bf16 0.95x / 0.97x,
  // fine-grained 0.96-0.98x with 1).
  const size_t per_item = (K + static_cast<size_t>(want_items) - 1) / static_cast<size_t>(want_items);
  const size_t nc_min = std::min(round_up(K, col_unit), round_up(256, col_unit));
  const size_t weight_panel_share = plan.rowvec ? 1 : 2;
  const size_t nc_l2 = round_up(fit.l2 / (weight_panel_share * sizeof(float) * kc_words), col_unit);
  const size_t nc_max = std::max(round_up(256, col_unit), nc_l2);
  const size_t nc_cap = std::clamp(round_up(per_item, col_unit), nc_min, std::min(round_up(K, col_unit), nc_max));
  // Then as many blocks for each worker (narrower blocks cost less than a
  // worker idle while another finishes an extra one), all of about the same
  // width: a narrow last block would re-pack every row for a few columns.
  size_t blocks = (K + nc_cap - 1) / nc_cap;  // K >= 1 (validated)
  const auto worker_count = static_cast<size_t>(plan.workers);
  if (blocks > worker_count) blocks = round_up(blocks, worker_count);
  // Too few blocks for the workers: split the tokens into chunks as well,
  // or narrow the blocks further, or both. First by the workers a split
  // leaves without an item (a small batch has few tokens to chunk: with 1
  // token, K 7168 and 32 workers, 32 blocks of 224 columns, where the cost
  // alone chose 27 of 266), then by what it reads (split_cost). Chunks only
  // where blocks are too few: a column block of grad_x larger than the
  // last-level cache costs less than the extra chunks would (the
  // scatter-add's look-ahead hides grad_x's DRAM latency; measured:
  // large-token without an 8 MiB cap per chunk 0.96x the time, at 4x its
  // batch 0.94x). Narrowing changes no plan
  // of zmoe, large-token or fine-grained with 1 or 2 threads; with more
  // workers it does. Measured with that many workers time-sliced on the
  // 2-core Zen 4 (the work a plan implies, not its scaling), fused only,
  // against chunks alone: fine-grained with 64 workers (30 blocks x 9
  // chunks instead of 8 x 16) 0.70-0.72x the time, with 32 0.84-0.86x;
  // 4096 tokens x 8 of 256 experts, K = N = 512, with 4, 8 and 16 workers
  // 0.91-0.93x, 0.81x and 0.78-0.80x.
  // Where only the tokens are split (one column block), one chunk per
  // worker, not two (and the ranking below weighs that plan so): each
  // chunk packs again the weights of every expert it visits and gathers
  // rows from further apart (perf, large-token with two threads: weight
  // packing 3.1x the samples of one thread's, grad_y packing 1.8x).
  // Measured, two builds alternating call by call, two threads:
  // large-token f32 0.977x and 0.987x the time on the Zen 4 (A/A 1.004x),
  // f16 0.989x, bf16 0.987x, fast bf16 0.975x; 512 rows per expert at K
  // 256 (the row-vector engine) 0.948x; on the Zen 5 f32 0.978x and
  // 0.984x, bf16 0.988x. Weighed so, one block of whole chunks wins the
  // ranking more often with many workers (time-sliced on the 2-core Zen 4,
  // the work a plan implies: 16384 tokens x 2 of 64 experts, K 256, N
  // 1024, with 8 and 16 workers 0.925x and 0.939x the time of the blocks
  // the ranking chose when it counted two chunks per worker; 8192 x 2 of
  // 16, K 200, N 400, with 16 workers 0.886x). Column blocks stay two per
  // worker: with one, fine-grained bf16 took 1.041x on the Zen 5.
  auto chunks_of = [&](size_t b) {
    const int64_t items = b == 1 ? plan.workers : want_items;
    return chunks_for(items, static_cast<int64_t>(b), plan.workers, p.batch);
  };
  if (blocks < static_cast<size_t>(want_items)) {
    // (workers left idle, cost): the smaller, the better.
    auto rank = [&](size_t b) {
      const int64_t chunks = chunks_of(b), items = static_cast<int64_t>(b) * chunks;
      return std::pair(std::max<int64_t>(plan.workers - items, 0), split_cost(p, b, chunks, row_unit));
    };
    auto best = rank(blocks);
    for (size_t b = blocks + 1; b <= static_cast<size_t>(want_items); ++b) {
      const size_t nc = round_up((K + b - 1) / b, col_unit), actual = (K + nc - 1) / nc;
      if (nc < kNarrowestBlock) break;
      if (const auto r = rank(actual); r < best) best = r, blocks = actual;
    }
  }
  plan.nc = round_up((K + blocks - 1) / blocks, col_unit);
  plan.col_blocks = static_cast<int64_t>((K + plan.nc - 1) / plan.nc);
  plan.chunks = chunks_of(static_cast<size_t>(plan.col_blocks));
  plan.tokens_per_chunk = (p.batch + plan.chunks - 1) / plan.chunks;

  // ms: room for twice the average rows an expert has in a chunk, so an
  // expert rarely needs a second slot (which would pack its weights again),
  // as long as a slot of the widest blocks (ms x nc_max) and its packed
  // grad_y rows (ms x kc_max) fill at most 3/4 of the L2: the scatter-add
  // reads the slot from there. The cap is at least 64 rows whatever the L2
  // claims, so an expert with many rows does not pack its weights again
  // every few; an expert with few rows gets a slot as small as one row
  // tile.
  const size_t ms_l2 = round_nearest(fit.l2 * 3 / 4 / (sizeof(float) * (nc_max + kc_words)), row_unit);
  const size_t ms_max = std::max(ms_l2, round_up(64, row_unit));
  const int64_t avg_rows = p.G > 0 ? (p.M + p.G * plan.chunks - 1) / (p.G * plan.chunks) : 0;
  plan.ms = std::clamp(round_up(static_cast<size_t>(2 * avg_rows), row_unit), row_unit, ms_max);

  // pack_span (row-vector engine): grad_y panels for as much of the
  // reduction as fits next to the slot's Ct tile in the same 3/4 of the L2,
  // so that each strip runs all of it at once: its weight rows are read in
  // one sweep, its Ct tile finished while in L1 (fine-grained with 2
  // threads, all of N: 0.94-0.96x the time, f32 and fast bf16; zmoe's slots
  // leave room for kc only). Sized by the rows a slot actually holds, not
  // by ms: fine-grained with 1 thread has ~64 rows in slots of 128, all of
  // N instead of kc (measured: 0.97x the time, fast bf16 0.96x). The Ct
  // tile is kept as compact (rowvec_ld) rather than ms rows apart, so the
  // budget holds and the scatter-add reads it without holes (fine-grained
  // 0.96-0.98x the time with 1 and 2 threads, fast bf16 0.98-1.0x).
  if (plan.rowvec) {
    plan.span_budget = fit.l2 * 3 / 4 / sizeof(float);
    plan.max_span = round_up(N, plan.kc);
  }
  // ms and nc are multiples of the engine's units, so panels need no
  // padding; the row-vector engine's panels are sized for the slot height
  // that packs the most.
  size_t a_pack_floats = kernels::a_pack_floats(k, plan.ms, plan.kc);
  if (plan.rowvec) {
    a_pack_floats = 0;
    for (size_t rows = row_unit; rows <= plan.ms; rows += row_unit)
      a_pack_floats = std::max(a_pack_floats, rows * plan.panel_words(plan.pack_span(rows)));
  }
  if (regions == RegionsFor::kFusedItems)
    plan.workers = static_cast<int>(std::min<int64_t>(plan.workers, plan.work_items()));  // items >= 1
  size_t cursor = 0;
  size_t table_bytes = 0;
  bool ok = !__builtin_mul_overflow(static_cast<size_t>(p.M), sizeof(int32_t), &table_bytes) &&
            place_shared(&cursor, table_bytes, &plan.token_of_row) &&
            place_shared(&cursor, static_cast<size_t>(p.M), &plan.row_starts) &&
            place_shared(&cursor, static_cast<size_t>(p.batch), &plan.token_has_rows) &&
            place_shared(&cursor, (static_cast<size_t>(p.G) + 1) * sizeof(int64_t), &plan.group_start) &&
            place_shared(&cursor, 2 * static_cast<size_t>(p.G) * sizeof(int64_t), &plan.token_runs) &&
            place(&cursor, plan.ms * plan.nc * sizeof(float), plan.workers, &plan.ring) &&
            place(&cursor, a_pack_floats * sizeof(float), plan.workers, &plan.a_pack) &&
            place(&cursor, (plan.rowvec ? 2 * plan.rowvec->strip_floats : plan.nc * plan.kc) * sizeof(float),
                  plan.workers, &plan.b_pack) &&
            place(&cursor, plan.ms * (2 * sizeof(int32_t) + 1), plan.workers, &plan.row_lists) &&
            !__builtin_add_overflow(cursor, kWorkspaceAlign - 1, &plan.workspace_bytes);
  if (!ok)
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "workspace size overflows size_t (M=%" PRId64 ", G=%" PRId64 ")",
                p.M, p.G);
  *out = plan;
  return MOEGRAD_STATUS_SUCCESS;
}

size_t GradXPlan::rowvec_ld(size_t rows) const { return round_up(std::max<size_t>(rows, 1), rowvec->panel); }

size_t GradXPlan::pack_span(size_t rows) const {
  if (rowvec == nullptr) return kc;
  const size_t r = rowvec_ld(rows), slot = r * nc;
  const size_t span = span_budget > slot ? round_down((span_budget - slot) / r * rowvec->per_word, kc) : 0;
  return std::clamp(span, kc, max_span);
}

size_t GradXPlan::panel_words(size_t span) const { return span / kc * rowvec->words(kc); }

}  // namespace moegrad::plan
