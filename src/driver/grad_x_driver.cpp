#include "driver/grad_x_driver.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/canonical_nan.h"
#include "common/workspace_align.h"
#include "driver/packed_gemm.h"
#include "driver/routing_table.h"
#include "driver/rowvec_gemm.h"
#include "driver/scatter_add_split.h"
#include "runtime/cpu_features.h"
#include "runtime/parallel_items.h"

namespace moegrad::driver {
namespace {

struct Tables {
  int32_t* token_of_row;
  uint8_t* row_starts;
  uint8_t* token_has_rows;
  int64_t* group_start;
  int64_t* token_runs;
};

template <typename T>
T* region(std::byte* base, const plan::Region& r, int worker = 0) {
  return reinterpret_cast<T*>(base + r.offset + static_cast<size_t>(worker) * r.per_worker);
}

moegrad_status routing_phase(const GradXProblem& p, const plan::GradXPlan& plan, std::byte* base, Tables* t) {
  t->token_of_row = region<int32_t>(base, plan.token_of_row);
  t->row_starts = region<uint8_t>(base, plan.row_starts);
  t->token_has_rows = region<uint8_t>(base, plan.token_has_rows);
  t->group_start = region<int64_t>(base, plan.group_start);
  t->token_runs = region<int64_t>(base, plan.token_runs);
  if (auto s = build_group_start(p.group_list, p.group_list_type, p.M, "grad_y", t->group_start)) return s;
  return build_token_of_row(p, t->token_of_row);
}

GemmOperand expert_weight(const GradXProblem& p, int64_t g) {
  return GemmOperand{static_cast<const std::byte*>(p.weight) + g * p.w_g * dtype_bytes(p.dtype), p.w_k, p.w_n};
}

// The grad-x GEMM of expert g: A = grad_y [M, N], B = weight[g] seen as [K, N].
void grad_x_tile(const GradXProblem& p, const plan::GradXPlan& plan, int64_t g, const int32_t* rows, size_t count,
                 int64_t k0, int64_t kn, float* c, size_t ldc, PackScratch* scratch,
                 const kernels::PrefetchRows* dest_rows = nullptr) {
  const GemmBlocking blk{plan.kernels, p.dtype, plan.kc};
  const GemmOperand a{p.grad_y, p.gy_row, p.gy_col};
  packed_gemm_tile(blk, a, rows, count, expert_weight(p, g), static_cast<size_t>(k0), static_cast<size_t>(kn), 0, p.N,
                   c, ldc, scratch, -1, g, dest_rows);
}

// The same on the row-vector engine, transposed: ct[j*ldct + r], ldct =
// plan.rowvec_ld(count).
void grad_x_tile_rowvec(const GradXProblem& p, const plan::GradXPlan& plan, int64_t g, const int32_t* rows,
                        size_t count, int64_t k0, int64_t kn, float* ct, const PackScratch& scratch) {
  rowvec_gemm_tile(*plan.rowvec, p.dtype, plan.kc, plan.pack_span(count), GemmOperand{p.grad_y, p.gy_row, p.gy_col},
                   rows, count, expert_weight(p, g), static_cast<size_t>(k0), static_cast<size_t>(kn), p.N, ct,
                   plan.rowvec_ld(count), RowvecScratch{scratch.a_pack, scratch.b_pack});
}

// The rows of one ring slot: up to ms expanded rows of one expert whose token
// is in the item's range, in ascending order, and which of them are their
// token's first.
struct Slot {
  int32_t* rows;
  int32_t* tokens;
  uint8_t* starts;
  size_t count = 0;
  int64_t expert = -1;
};

// Walks an item's rows expert by expert, ascending, one slot at a time: in
// an expert whose rows form a token run (find_token_runs) only the run's
// rows of the item's tokens, found by binary search; in any other, every
// row, keeping those of the item's tokens.
class SlotGatherer {
 public:
  SlotGatherer(const GradXProblem& p, const Tables& t, int64_t t0, int64_t t1, size_t ms)
      : p_(p), t_(t), t0_(t0), t1_(t1), ms_(ms) {}

  // Fills *s; false when the item has no rows left.
  bool next(Slot* s) {
    s->count = 0;
    while (g_ < p_.G) {
      if (!entered_) enter_expert();
      for (; i_ < end_ && s->count < ms_; ++i_) {
        const int32_t b = t_.token_of_row[i_];
        if (b >= t0_ && b < t1_) {
          s->rows[s->count] = static_cast<int32_t>(i_);
          s->tokens[s->count] = b;
          s->starts[s->count] = t_.row_starts[i_];
          ++s->count;
        }
      }
      const int64_t g = g_;
      if (i_ == end_) {  // the expert is done
        ++g_;
        entered_ = false;
      }
      if (s->count > 0) {
        s->expert = g;
        return true;
      }
    }
    return false;
  }

 private:
  // Sets [i_, end_) to the rows of expert g_ that may hold the item's tokens.
  void enter_expert() {
    entered_ = true;
    const int64_t first = t_.token_runs[2 * g_], end = t_.token_runs[2 * g_ + 1];
    if (first < 0) {
      i_ = t_.group_start[g_];
      end_ = t_.group_start[g_ + 1];
      return;
    }
    const int32_t* tokens = t_.token_of_row;
    const int32_t* lo = std::lower_bound(tokens + first, tokens + end, t0_);
    i_ = lo - tokens;
    end_ = std::lower_bound(lo, tokens + end, t1_) - tokens;
  }

  const GradXProblem& p_;
  const Tables& t_;
  const int64_t t0_, t1_;
  const size_t ms_;
  int64_t g_ = 0;
  bool entered_ = false;
  int64_t i_ = 0, end_ = 0;
};

float* grad_x_at(const GradXProblem& p, int64_t b, int64_t k) { return p.grad_x + b * p.gx_row + k * p.gx_col; }

// Requests the cache lines of [first, first + bytes) for writing, into L1.
void prefetch_span(const float* first, size_t bytes) {
  const auto* b = reinterpret_cast<const std::byte*>(first);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(b + off, 1, 3);
}

void zero_block(const GradXProblem& p, int64_t t0, int64_t t1, int64_t k0, int64_t kn) {
  for (int64_t b = t0; b < t1; ++b)
    for (int64_t k = 0; k < kn; ++k) *grad_x_at(p, b, k0 + k) = 0.0f;
}

// grad_x[b, k0:k0+kn] = 0 + src[0:kn]: the token's first add (SPEC §5), on
// a row that was never zeroed (the sum keeps a -0.0 in src from reaching
// grad_x, as 0 + -0.0 is +0.0). Like every store of a sum into grad_x, it
// stores a NaN as the canonical one (common/canonical_nan.h).
void start_grad_x(const GradXProblem& p, const kernels::GemmKernels& k, int64_t b, int64_t k0, int64_t kn,
                  const float* src) {
  if (p.gx_col == 1) {
    k.start_row(grad_x_at(p, b, k0), src, static_cast<size_t>(kn));
    return;
  }
  for (int64_t j = 0; j < kn; ++j) *grad_x_at(p, b, k0 + j) = canonical_nan(0.0f + src[j]);
}

// grad_x[b, k0:k0+kn] += src[0:kn]
void add_into_grad_x(const GradXProblem& p, const kernels::GemmKernels& k, int64_t b, int64_t k0, int64_t kn,
                     const float* src) {
  if (p.gx_col == 1) {
    k.add_row(grad_x_at(p, b, k0), src, static_cast<size_t>(kn));
    return;
  }
  for (int64_t j = 0; j < kn; ++j) {
    float* d = grad_x_at(p, b, k0 + j);
    *d = canonical_nan(*d + src[j]);
  }
}

// One work item: tokens [t0, t1) x grad_x columns [k0, k0 + kn).
void run_item(const GradXProblem& p, const plan::GradXPlan& plan, const Tables& t, std::byte* base,
              int64_t item, int worker) {
  const int64_t chunk = item / plan.col_blocks, block = item % plan.col_blocks;
  const int64_t t0 = chunk * plan.tokens_per_chunk;
  const int64_t t1 = std::min(p.batch, t0 + plan.tokens_per_chunk);
  const int64_t k0 = block * static_cast<int64_t>(plan.nc);
  const int64_t kn = std::min<int64_t>(static_cast<int64_t>(plan.nc), p.K - k0);

  float* slot = region<float>(base, plan.ring, worker);
  int32_t* list = region<int32_t>(base, plan.row_lists, worker);
  PackScratch scratch{region<float>(base, plan.a_pack, worker), region<float>(base, plan.b_pack, worker)};

  // The slot's grad_x rows are requested into L2 while its last column
  // pass computes, and each one a few rows ahead into L1 while the rows
  // before it are added: tokens come in random order, which no hardware
  // prefetcher follows. Measured on large-token (grad_x 56 MB, far beyond
  // the L3), fused only: the look-ahead 0.78x the time without it; the L2
  // requests 0.94-0.96x the time of the look-ahead alone with one thread,
  // 0.91-0.95x with two (a scatter-add stalled on DRAM misses before), on
  // a Zen 4. On a Zen 5, whose kernel call takes half as long, the kernel
  // stalls on those requests instead (perf: a quarter of its samples);
  // without them: 0.90-0.94x the time with one thread, 0.98-0.99x with
  // two (f32, f16, bf16; two builds alternating call by call in one
  // process). So they are made on every CPU but AMD's family 0x1a and
  // later; no other generation has been measured. Only rows contiguous
  // along K are requested (a PrefetchRows row is a span of lines).
  const bool request_rows_into_l2 = p.gx_col == 1 && runtime::tuning_amd_family() < 0x1au;
  // A token's first row stores 0 + c instead of adding into a zeroed row:
  // only tokens without rows are zeroed, and no first add reads grad_x.
  // Before, zeroing the block took 1.5-2.7% of perf's samples on
  // fine-grained and large-token. Measured on a Zen 5, two builds
  // alternating call by call: large-token 0.97-0.99x the time with one
  // and two threads (bf16 0.96x, AVX2 0.97x), fine-grained 0.98-0.99x,
  // zmoe 0.99x.
  for (int64_t b = t0; b < t1; ++b)
    if (t.token_has_rows[b] == 0) zero_block(p, b, b + 1, k0, kn);
  Slot slot_rows{list, list + plan.ms, reinterpret_cast<uint8_t*>(list + 2 * plan.ms)};
  SlotGatherer gather(p, t, t0, t1, plan.ms);
  while (gather.next(&slot_rows)) {
    // Scatter-add while the slot is hot, rows in ascending order.
    if (plan.rowvec) {
      grad_x_tile_rowvec(p, plan, slot_rows.expert, slot_rows.rows, slot_rows.count, k0, kn, slot, scratch);
      plan.rowvec->add_cols(slot, plan.rowvec_ld(slot_rows.count), slot_rows.count, static_cast<size_t>(kn),
                            grad_x_at(p, 0, k0), p.gx_row, slot_rows.tokens, true, slot_rows.starts);
      continue;
    }
    const size_t row_bytes = static_cast<size_t>(kn) * sizeof(float);
    const auto* gx0 = reinterpret_cast<const std::byte*>(grad_x_at(p, 0, k0));
    const int64_t gx_stride = p.gx_row * static_cast<int64_t>(sizeof(float));
    // One line more where a row may start mid-line (prefetches never fault).
    const bool aligned = reinterpret_cast<uintptr_t>(gx0) % 64 == 0 && gx_stride % 64 == 0;
    const kernels::PrefetchRows dest{gx0, slot_rows.tokens, gx_stride, slot_rows.count,
                                     (row_bytes + 63) / 64 + (aligned ? 0 : 1), true};
    grad_x_tile(p, plan, slot_rows.expert, slot_rows.rows, slot_rows.count, k0, kn, slot, plan.nc, &scratch,
                request_rows_into_l2 ? &dest : nullptr);
    for (size_t r = 0; r < slot_rows.count; ++r) {
      if (r + kAddAhead < slot_rows.count)
        prefetch_span(grad_x_at(p, slot_rows.tokens[r + kAddAhead], k0), row_bytes);
      if (slot_rows.starts[r] != 0) {
        start_grad_x(p, *plan.kernels, slot_rows.tokens[r], k0, kn, slot + r * plan.nc);
      } else {
        add_into_grad_x(p, *plan.kernels, slot_rows.tokens[r], k0, kn, slot + r * plan.nc);
      }
    }
  }
}

}  // namespace

moegrad_status run_grad_x(const GradXProblem& p, const plan::GradXPlan& plan, void* workspace,
                          runtime::ThreadPool& pool, int threads) {
  std::byte* base = aligned_base(workspace);
  Tables t{};
  if (auto s = routing_phase(p, plan, base, &t)) return s;
  // Only the fused scatter-add starts sums with a store; the non-fused one
  // adds into zeroed rows.
  mark_token_starts(p, t.token_of_row, t.row_starts, t.token_has_rows);
  find_token_runs(t.group_start, p.G, t.token_of_row, t.token_runs);
  runtime::parallel_items(pool, std::min(threads, plan.workers), plan.work_items(),
                 [&](int64_t item, int worker) { run_item(p, plan, t, base, item, worker); });
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status run_nonfused_grad_x(const GradXProblem& p, const plan::GradXPlan& plan, void* workspace,
                                   runtime::ThreadPool& pool, int threads, float* d_expanded_x) {
  std::byte* base = aligned_base(workspace);
  Tables t{};
  if (auto s = routing_phase(p, plan, base, &t)) return s;
  threads = std::min(threads, plan.workers);
  const size_t K = static_cast<size_t>(p.K);

  // Step 1: grouped GEMM into the full [M, K] intermediate, one item per
  // (slot of rows, column block).
  const int64_t row_tiles = (p.M + static_cast<int64_t>(plan.ms) - 1) / static_cast<int64_t>(plan.ms);
  runtime::parallel_items(pool, threads, row_tiles * plan.col_blocks, [&](int64_t item, int worker) {
    const int64_t i0 = (item / plan.col_blocks) * static_cast<int64_t>(plan.ms);
    const int64_t k0 = (item % plan.col_blocks) * static_cast<int64_t>(plan.nc);
    const int64_t kn = std::min<int64_t>(static_cast<int64_t>(plan.nc), p.K - k0);
    const int64_t i1 = std::min(p.M, i0 + static_cast<int64_t>(plan.ms));
    int32_t* rows = region<int32_t>(base, plan.row_lists, worker);
    PackScratch scratch{region<float>(base, plan.a_pack, worker), region<float>(base, plan.b_pack, worker)};
    // Rows of one tile can span experts: one tile per expert segment.
    const int64_t* gs = t.group_start;
    int64_t g = std::upper_bound(gs, gs + p.G + 1, i0) - gs - 1;
    for (int64_t i = i0; i < i1; ++g) {
      const int64_t seg_end = std::min(i1, gs[g + 1]);
      if (seg_end == i) continue;
      for (int64_t r = i; r < seg_end; ++r) rows[r - i] = static_cast<int32_t>(r);
      const size_t count = static_cast<size_t>(seg_end - i);
      float* dst = d_expanded_x + static_cast<size_t>(i) * K + static_cast<size_t>(k0);
      if (plan.rowvec) {
        // Through the slot, transposed back into d_expanded_x's rows.
        float* slot = region<float>(base, plan.ring, worker);
        grad_x_tile_rowvec(p, plan, g, rows, count, k0, kn, slot, scratch);
        int32_t* local = rows + plan.ms;
        for (size_t r = 0; r < count; ++r) local[r] = static_cast<int32_t>(r);
        plan.rowvec->add_cols(slot, plan.rowvec_ld(count), count, static_cast<size_t>(kn), dst,
                              static_cast<int64_t>(K), local, false, nullptr);
      } else {
        grad_x_tile(p, plan, g, rows, count, k0, kn, dst, K, &scratch);
      }
      i = seg_end;
    }
  });

  // Step 2: scatter-add (MoeInitRoutingGrad), column blocks in parallel,
  // rows in ascending order.
  const int64_t width = scatter_add_block_width(p.K, threads);
  runtime::parallel_items(pool, threads, (p.K + width - 1) / width, [&](int64_t block, int) {
    const int64_t k0 = block * width;
    const int64_t kn = std::min(width, p.K - k0);
    zero_block(p, 0, p.batch, k0, kn);
    for (int64_t i = 0; i < p.M; ++i) {
      // The same look-ahead as the fused scatter-add (tokens in random order).
      if (i + kAddAhead < p.M && t.token_of_row[i + kAddAhead] >= 0)
        prefetch_span(grad_x_at(p, t.token_of_row[i + kAddAhead], k0), static_cast<size_t>(kn) * sizeof(float));
      const int32_t b = t.token_of_row[i];
      if (b >= 0) add_into_grad_x(p, *plan.kernels, b, k0, kn, d_expanded_x + static_cast<size_t>(i) * K + k0);
    }
  });
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad::driver
