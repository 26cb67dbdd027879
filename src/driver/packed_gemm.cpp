#include "driver/packed_gemm.h"

#include <algorithm>

namespace moegrad::driver {

namespace {
// Reduction steps packed across all of a block's B micro-panels per sweep
// (even: the fast bf16 mode packs them in pairs).
constexpr size_t kBRowsPerSweep = 16;
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
  for (size_t pc = 0; pc < total; pc += blk.kc) {
    const size_t kc = std::min(blk.kc, total - pc);
    const size_t n0 = static_cast<size_t>(p0) + pc;
    // B panel: cols columns, [kc][NR] per micro-panel.
    if (!(single_block && b_key >= 0 && scratch->b_key == b_key)) {
      // B contiguous along its outer dimension (grad-x's weight as a [G, N,
      // K] buffer viewed transposed; the forward's weight; the weight
      // grad's grad_y): each reduction step is a run of `cols` elements,
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
      const float* bp = scratch->b_pack + (jr / k.nr) * kc * k.nr;
      for (size_t ir = 0; ir < count; ir += k.mr) {
        float* ap = scratch->a_pack + (ir / k.mr) * a_panel;
        if (rows_a == nullptr) {
          k.ukernel(kc, ap, bp, c + ir * ldc + jr, ldc, std::min(k.mr, count - ir), std::min(k.nr, cols - jr),
                    pc > 0, canonical_nans);
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
        rows_a->ukernel(kc, ap, bp, c + ir * ldc + jr, ldc, std::min(k.mr, count - ir), std::min(k.nr, cols - jr),
                        pc > 0, canonical_nans, next);
      }
    }
  }
}

}  // namespace moegrad::driver
