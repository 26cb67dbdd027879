#include "driver/packed_gemm.h"

#include <algorithm>

#include "driver/prefetcher.h"

namespace moegrad::driver {
namespace {

// The panel a later block of this tile reads from operand `o`: rows j (or p)
// with a contiguous dimension; nothing for fully strided layouts.
PrefetchRegion panel_region(const GemmOperand& o, size_t elem, const int32_t* rows, size_t j0, size_t count, size_t p,
                            size_t len) {
  PrefetchRegion r;
  const auto e = static_cast<int64_t>(elem);
  if (o.reduce_stride == 1) {  // rows along the outer index, contiguous along the reduction
    r.base = static_cast<const char*>(o.data) + (static_cast<int64_t>(j0) * o.outer_stride + static_cast<int64_t>(p)) * e;
    r.row_step = o.outer_stride * e;
    r.row_index = rows;
    r.rows = count;
    r.row_bytes = len * elem;
  } else if (o.outer_stride == 1 && rows == nullptr) {  // rows along the reduction, contiguous along j
    r.base = static_cast<const char*>(o.data) + (static_cast<int64_t>(p) * o.reduce_stride + static_cast<int64_t>(j0)) * e;
    r.row_step = o.reduce_stride * e;
    r.rows = len;
    r.row_bytes = count * elem;
  }
  return r;
}

}  // namespace

void packed_gemm_tile(const GemmBlocking& blk, const GemmOperand& a, const int32_t* rows, size_t count,
                      const GemmOperand& b, size_t j0, size_t cols, int64_t p0, int64_t len, float* c,
                      size_t ldc, PackScratch* scratch, int64_t b_key, const GemmOperand* next_b,
                      Prefetcher* extra) {
  const kernels::GemmKernels& k = *blk.kernels;
  const int dt = static_cast<int>(blk.dtype);
  const size_t total = static_cast<size_t>(len);
  const bool single_block = total <= blk.kc;
  if (total == 0) {  // an empty reduction is +0.0 (the start of every chain)
    for (size_t r = 0; r < count; ++r) std::fill(c + r * ldc, c + r * ldc + cols, 0.0f);
    return;
  }
  for (size_t pc = 0; pc < total; pc += blk.kc) {
    const size_t kc = std::min(blk.kc, total - pc);
    const size_t n0 = static_cast<size_t>(p0) + pc;
    // B panel: cols columns, [kc][NR] per micro-panel.
    if (!(single_block && b_key >= 0 && scratch->b_key == b_key)) {
      for (size_t jr = 0; jr < cols; jr += k.nr)
        k.pack_b[dt](b.data, b.outer_stride, b.reduce_stride, j0 + jr, std::min(k.nr, cols - jr), n0, kc,
                     scratch->b_pack + (jr / k.nr) * kc * k.nr);
      scratch->b_key = single_block ? b_key : -1;
    }
    // A panel: the gathered rows, [kc][MR] per micro-panel.
    for (size_t ir = 0; ir < count; ir += k.mr)
      k.pack_a[dt](a.data, a.outer_stride, a.reduce_stride, rows + ir, std::min(k.mr, count - ir), n0, kc,
                   scratch->a_pack + (ir / k.mr) * kc * k.mr);
    // While this block computes, bring in what the next one reads: this
    // tile's next reduction block of A and B, or on the last block the
    // caller's next B and whatever the caller adds (its next slot's rows).
    const size_t calls = ((cols + k.nr - 1) / k.nr) * ((count + k.mr - 1) / k.mr);
    const size_t elem = static_cast<size_t>(dtype_bytes(blk.dtype));
    Prefetcher prefetch;
    if (pc + kc < total) {
      const size_t next_kc = std::min(blk.kc, total - pc - kc);
      prefetch.add(panel_region(b, elem, nullptr, j0, cols, n0 + kc, next_kc));
      prefetch.add(panel_region(a, elem, rows, 0, count, n0 + kc, next_kc));
    } else if (next_b != nullptr) {
      prefetch.add(panel_region(*next_b, elem, nullptr, j0, cols, static_cast<size_t>(p0), std::min(blk.kc, total)));
    }
    prefetch.spread_over(calls);
    if (extra != nullptr && pc + kc >= total) extra->spread_over(calls);
    // The B micro-panel stays in L1 while A micro-panels stream past it.
    for (size_t jr = 0; jr < cols; jr += k.nr) {
      const float* bp = scratch->b_pack + (jr / k.nr) * kc * k.nr;
      for (size_t ir = 0; ir < count; ir += k.mr) {
        k.ukernel(kc, scratch->a_pack + (ir / k.mr) * kc * k.mr, bp, c + ir * ldc + jr, ldc,
                  std::min(k.mr, count - ir), std::min(k.nr, cols - jr), pc > 0);
        prefetch.step();
        if (extra != nullptr && pc + kc >= total) extra->step();
      }
    }
  }
}

}  // namespace moegrad::driver
