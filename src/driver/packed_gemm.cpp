#include "driver/packed_gemm.h"

#include <algorithm>
#include <cstdint>

namespace moegrad::driver {

namespace {
// Reduction steps packed across all of a block's B micro-panels per sweep
// (even: the fast bf16 mode packs them in pairs).
constexpr size_t kBRowsPerSweep = 16;

// 0, 1, 2, ...: the row list of a PrefetchRows over consecutive rows of B
// (as many as the longest reduction block).
constexpr size_t kMaxStridedKc = 1024;
constexpr struct Iota {
  int32_t v[kMaxStridedKc];
  constexpr Iota() : v() {
    for (size_t i = 0; i < kMaxStridedKc; ++i) v[i] = static_cast<int32_t>(i);
  }
} kIota;

// The lines a span of `bytes` from `first`, and from each row row_bytes
// after it, can touch: where the rows are whole lines apart they all start
// at first's offset in its line, otherwise one more covers any offset.
size_t span_lines(const std::byte* first, int64_t row_bytes, size_t bytes) {
  if (row_bytes % 64 != 0) return (bytes + 63) / 64 + 1;
  return (reinterpret_cast<uintptr_t>(first) % 64 + bytes + 63) / 64;
}

// With B read in place, the kernel calls of column panel jr (jr > 0: the
// first panel's calls request A's next rows) request the panel read after
// it: the next full panel of this block, or after the last one the next
// block's first (none after the last block; the next block's second panel
// is read cold). Call ir of the panel's calls takes its share of that
// panel's rows, each NR elements wide (f32: two lines, three where rows
// start mid-line), into L1: a row misses there on its first read otherwise,
// since rows a weight row apart defeat the hardware prefetchers. Empty
// where there is nothing to request.
kernels::PrefetchRows next_b_panel(const kernels::GemmKernels& k, const GemmOperand& b, size_t elem, size_t j0,
                                   size_t cols, size_t jr, size_t ir, size_t count, size_t n0, size_t kc,
                                   size_t next_kc) {
  size_t nj = jr + k.nr, np = n0, nkc = kc;
  if (nj + k.nr > cols) nj = 0, np = n0 + kc, nkc = next_kc;
  const size_t calls = (count + k.mr - 1) / k.mr, share = (kc + calls - 1) / calls, from = ir / k.mr * share;
  if (from >= nkc) return {};  // nkc <= blk.kc <= kMaxStridedKc: in_place_b asks it
  const auto* first = static_cast<const std::byte*>(b.data) +
                      (static_cast<int64_t>(np) * b.reduce_stride + static_cast<int64_t>(j0 + nj)) *
                          static_cast<int64_t>(elem);
  const int64_t row_bytes = b.reduce_stride * static_cast<int64_t>(elem);
  return {first, kIota.v + from, row_bytes, std::min(share, nkc - from), span_lines(first, row_bytes, k.nr * elem),
          false};
}

// With an operand packed a sweep at a time from rows a whole row apart
// (contiguous along its outer dimension, not read in place), kernel calls
// of a block that request nothing else request the rows of it that the
// next block packs, into L2: the pack pass then finds them there instead
// of waiting on DRAM with no FMA to overlap: the plain kernels' A and B
// (the weight grad's x^T and grad_y where an expert's rows take several
// blocks; the copied-rows kernels read such a B in place instead). Call
// `call` of the block's `calls` such calls takes its share of the next
// block's rows, all of their columns [col0, col0 + cols). Empty where there
// is nothing to request.
kernels::PrefetchRows next_block_rows(const GemmOperand& op, size_t elem, size_t col0, size_t cols, size_t call,
                                      size_t calls, size_t next_n0, size_t next_kc) {
  const size_t share = (next_kc + calls - 1) / calls, from = call * share;
  if (from >= next_kc) return {};
  const auto* first = static_cast<const std::byte*>(op.data) +
                      (static_cast<int64_t>(next_n0) * op.reduce_stride + static_cast<int64_t>(col0)) *
                          static_cast<int64_t>(elem);
  const int64_t row_bytes = op.reduce_stride * static_cast<int64_t>(elem);
  return {first, kIota.v + from, row_bytes, std::min(share, next_kc - from), span_lines(first, row_bytes, cols * elem),
          true};
}

// The lines of the mr x nr tile of C at c (rows ldc floats apart), for a
// copied-rows kernel call that requests nothing else, where C is a layer
// operator's output no later step reads (GemmBlocking::canonical_nans): its
// lines come from DRAM, and a call whose stores missed them stalled the
// calls after it (forward, large-token, fast bf16 mode: a quarter of perf's
// samples on the instruction after such a call). The plain kernels request
// theirs themselves (CTilePrefetcher).
kernels::PrefetchRows c_tile_lines(const float* c, size_t ldc, size_t mr, size_t nr) {
  const auto* first = reinterpret_cast<const std::byte*>(c);
  const auto row_bytes = static_cast<int64_t>(ldc * sizeof(float));
  return {first, kIota.v, row_bytes, mr, span_lines(first, row_bytes, nr * sizeof(float)), false};
}

}  // namespace

void packed_gemm_tile(const GemmBlocking& blk, const GemmOperand& a, const int32_t* rows, size_t count,
                      const GemmOperand& b, size_t j0, size_t cols, int64_t p0, int64_t len, float* c,
                      size_t ldc, PackScratch* scratch, int64_t a_key, int64_t b_key,
                      const kernels::PrefetchRows* dest_rows) {
  const kernels::GemmKernels& k = *blk.kernels;
  const int dt = static_cast<int>(blk.dtype);
  const size_t total = static_cast<size_t>(len);
  const bool single_block = total <= blk.kc;
  // A contiguous along the reduction is copied, not transposed, where the
  // ISA has that micro-kernel (the only per-row transpose otherwise).
  const kernels::RowsAKernels* rows_a =
      k.rows_a != nullptr && k.rows_a->pack[dt] != nullptr && a.reduce_stride == 1 && blk.kc <= k.rows_a->max_kc
          ? k.rows_a
          : nullptr;
  const size_t a_panel = rows_a != nullptr ? k.mr * rows_a->ld : k.mr * blk.kc;
  if (total == 0) {  // an empty reduction is +0.0 (the start of every chain)
    for (size_t r = 0; r < count; ++r) std::fill(c + r * ldc, c + r * ldc + cols, 0.0f);
    return;
  }
  const size_t elem = dtype_bytes(blk.dtype);
  // A B contiguous along its outer dimension (the forward's weight,
  // grad-x's [G, N, K] one) is read in place by the copied-rows kernel
  // (every copied-rows table has that variant for each dtype its rows
  // take): each full NR-column
  // micro-panel by the first call that uses it, which also packs it for the
  // panel's other calls, and only a last narrower one packed up front. Each
  // element of such a weight feeds the few rows of one expert's tile, so a
  // pack pass before the kernels cost about as much as using it, its DRAM
  // reads not overlapped with any FMA. Against that pass, one thread:
  //  - f32: forward, fine-grained, 0.82x the time; grad-x with a [G, N, K]
  //    weight 0.85x;
  //  - f16 and bf16, widened as they are read: forward, fine-grained, 0.83x
  //    both (two threads, bf16 0.83x); zmoe bf16 0.93x; grad-x with a
  //    [G, N, K] weight, fine-grained bf16 0.78x, zmoe f16 0.85x;
  //  - bf16 pairs (the fast bf16 mode, two rows interleaved per pair):
  //    forward, fine-grained, 0.84x (two threads 0.77x); zmoe 0.95x.
  // Every call reading in place instead took 1.04x the time of the pack
  // pass at zmoe's size with two threads (f32): a panel's rows are a weight
  // row apart, each on its own page.
  // Not where the caller's B panel is already packed (grad-x's tiles of one
  // expert, one block: large-token's 128 x 256 weight packed once for its
  // 3686 rows, which a read in place would pack again per tile: 1.03x the
  // time, grad-x with a [G, N, K] weight).
  const bool reuse_b = single_block && b_key >= 0 && scratch->b_key == b_key;
  const kernels::InPlaceBUkernelFn ukernel_in_place_b = rows_a != nullptr ? rows_a->ukernel_in_place_b[dt] : nullptr;
  const bool in_place_b = !reuse_b && ukernel_in_place_b != nullptr && b.outer_stride == 1 && b.reduce_stride > 0 &&
                          blk.kc <= kMaxStridedKc;
  // Where the rows take at most two micro-panels, both calls of a panel
  // read it in place and none packs it: the second finds the lines in L1
  // or L2, where the packed copy was a 32 KiB store stream through the L1
  // that holds the next panel's requested rows. Forward, 16 rows per
  // expert: f32 0.94x the time (two threads 0.96x), bf16 0.95x, fast bf16
  // 0.96x; 32 rows 0.97x; fine-grained, zmoe, large-token 0.99-1.0x;
  // grad-x with a [G, N, K] weight at 16 rows 0.98x. Not for more calls: up to
  // five, fine-grained took 0.96x with one thread but 1.02x with two and
  // in the fast bf16 mode (whose in-place calls interleave pairs); every
  // call, zmoe 1.11x with two threads.
  const bool in_place_only = in_place_b && count <= 2 * k.mr;
  // The plain kernels' calls that request the next block's rows
  // (next_block_rows): B's from the first calls of a block and A's from the
  // rest, in proportion to their bytes, each where it is contiguous along
  // its outer dimension (A: rows ascending, at most a few times as many
  // columns apart as it has rows).
  const size_t row_panels = (count + k.mr - 1) / k.mr, col_panels = (cols + k.nr - 1) / k.nr;
  const size_t a_span = rows_a == nullptr && count > 0 && rows[count - 1] >= rows[0]
                            ? static_cast<size_t>(rows[count - 1] - rows[0]) + 1
                            : 0;
  const bool plain_a = a_span > 0 && a_span <= 4 * count && a.outer_stride == 1 && a.reduce_stride > 0;
  const bool plain_b = rows_a == nullptr && b.outer_stride == 1 && b.reduce_stride > 0;
  const size_t plain_calls = blk.kc <= kMaxStridedKc ? col_panels * row_panels : 0;
  const size_t plain_b_calls =
      !plain_b ? 0 : !plain_a ? plain_calls : std::max<size_t>(plain_calls * cols / (cols + a_span), 1);
  for (size_t pc = 0; pc < total; pc += blk.kc) {
    const size_t kc = std::min(blk.kc, total - pc);
    const size_t n0 = static_cast<size_t>(p0) + pc;
    // B panel: cols columns, [kc][NR] per micro-panel.
    if (in_place_b) {  // only a last, narrower micro-panel is packed
      const size_t full = cols / k.nr * k.nr;
      if (full < cols)
        k.pack_b[dt](b.data, b.outer_stride, b.reduce_stride, j0 + full, cols - full, n0, kc,
                     scratch->b_pack + (full / k.nr) * kc * k.nr);
      // Whole once the calls below have packed the full panels (rows that
      // fit two micro-panels leave them unpacked).
      scratch->b_key = single_block && !in_place_only ? b_key : -1;
    } else if (!reuse_b) {
      // B contiguous along its outer dimension with A packed transposed
      // (the weight grad's grad_y; the forward's weight, or grad-x's as a
      // [G, N, K] buffer, where A is not contiguous along the reduction or
      // the ISA is scalar): each reduction step is a run of `cols` elements,
      // the runs a whole row apart. Panel by panel, each panel would read a
      // short piece of each of kc rows; a few steps at a time across all
      // panels reads each run in one sweep instead (grad-x with a [G, N, K]
      // weight, packed engine, two builds alternating call by call:
      // fine-grained 0.93x the time with one thread, 0.92x with two; zmoe
      // 0.94x).
      const size_t p_step = b.outer_stride == 1 && b.reduce_stride != 1 ? kBRowsPerSweep : kc;
      for (size_t pp = 0; pp < kc; pp += p_step)
        for (size_t jr = 0; jr < cols; jr += k.nr)
          k.pack_b[dt](b.data, b.outer_stride, b.reduce_stride, j0 + jr, std::min(k.nr, cols - jr), n0 + pp,
                       std::min(p_step, kc - pp), scratch->b_pack + (jr / k.nr) * kc * k.nr + pp / k.per_word * k.nr);
      scratch->b_key = single_block ? b_key : -1;
    }
    if (rows_a != nullptr) {
      scratch->a_key = -1;  // a_pack will hold copied rows
    } else if (!(single_block && a_key >= 0 && scratch->a_key == a_key)) {
      // A panel: the gathered rows, [kc][MR] per micro-panel.
      for (size_t ir = 0; ir < count; ir += k.mr)
        k.pack_a[dt](a.data, a.outer_stride, a.reduce_stride, rows + ir, std::min(k.mr, count - ir), n0, kc,
                     scratch->a_pack + (ir / k.mr) * a_panel);
      scratch->a_key = single_block ? a_key : -1;
    }
    const bool canonical_nans = blk.canonical_nans && pc + kc >= total;
    // The B micro-panel stays in L1 while A micro-panels stream past it.
    for (size_t jr = 0; jr < cols; jr += k.nr) {
      float* bp = scratch->b_pack + (jr / k.nr) * kc * k.nr;
      for (size_t ir = 0; ir < count; ir += k.mr) {
        float* ap = scratch->a_pack + (ir / k.mr) * a_panel;
        if (rows_a == nullptr) {
          kernels::PrefetchRows next;
          if (pc + kc < total && plain_calls > 0) {
            const size_t call = jr / k.nr * row_panels + ir / k.mr, next_kc = std::min(blk.kc, total - pc - kc);
            if (call < plain_b_calls) {
              next = next_block_rows(b, elem, j0, cols, call, plain_b_calls, n0 + kc, next_kc);
            } else if (plain_a && plain_calls > plain_b_calls) {
              next = next_block_rows(a, elem, static_cast<size_t>(rows[0]), a_span, call - plain_b_calls,
                                     plain_calls - plain_b_calls, n0 + kc, next_kc);
            }
          }
          k.ukernel(kc, ap, bp, c + ir * ldc + jr, ldc, std::min(k.mr, count - ir), std::min(k.nr, cols - jr),
                    pc > 0, canonical_nans, next);
          continue;
        }
        // Copied rows: each micro-panel is copied on first use, and the
        // kernel call that first uses it requests the next micro-panel's
        // grad_y rows meanwhile (large-token: 0.88x the time of copying
        // every micro-panel up front, where each copy waited on DRAM).
        kernels::PrefetchRows next;
        if (jr == 0) {
          rows_a->pack[dt](a.data, a.outer_stride, rows + ir, std::min(k.mr, count - ir), n0, kc, ap);
          if (ir + k.mr < count)  // one line more covers a span that starts mid-line
            next = {static_cast<const std::byte*>(a.data) + n0 * elem, rows + ir + k.mr,
                    a.outer_stride * static_cast<int64_t>(elem), std::min(k.mr, count - ir - k.mr),
                    (kc * elem + 63) / 64 + 1};
        } else if (dest_rows != nullptr && pc + kc >= total && jr + k.nr >= cols) {
          // The last pass: the destination rows of these rows, into L2.
          next = *dest_rows;
          next.rows += ir;
          next.count = std::min(k.mr, count - ir);
        }
        if (in_place_b && jr > 0 && next.count == 0)
          next = next_b_panel(k, b, elem, j0, cols, jr, ir, count, n0, kc,
                              pc + kc < total ? std::min(blk.kc, total - pc - kc) : 0);
        if (blk.canonical_nans && next.count == 0)
          next = c_tile_lines(c + ir * ldc + jr, ldc, std::min(k.mr, count - ir), std::min(k.nr, cols - jr));
        if (in_place_b && (ir == 0 || in_place_only) && jr + k.nr <= cols) {
          // The panel's first call reads it in place and packs it for the
          // panel's other calls (each call reads it in place where the rows
          // fit two micro-panels).
          const std::byte* bs = static_cast<const std::byte*>(b.data) +
                                (static_cast<int64_t>(n0) * b.reduce_stride + static_cast<int64_t>(j0 + jr)) *
                                    static_cast<int64_t>(elem);
          ukernel_in_place_b(kc, ap, bs, static_cast<size_t>(b.reduce_stride), in_place_only ? nullptr : bp,
                             c + ir * ldc + jr, ldc, std::min(k.mr, count - ir), pc > 0, canonical_nans, next);
          continue;
        }
        rows_a->ukernel(kc, ap, bp, c + ir * ldc + jr, ldc, std::min(k.mr, count - ir), std::min(k.nr, cols - jr),
                        pc > 0, canonical_nans, next);
      }
    }
  }
}

}  // namespace moegrad::driver
