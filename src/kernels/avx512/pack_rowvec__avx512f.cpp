// Operands of the row-vector engine: grad_y rows transposed into [kc][32]
// panels (16x16 register transposes, widened on the way) and weight rows
// copied, not transposed, into a [14][kStripLd] strip.

#include <cstdint>

#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"
#include "kernels/avx512/widen__avx512f.h"

namespace moegrad::kernels::avx512 {
namespace {

// A[p][r] = grad_y[rows[r], n0 + p], rows >= count zero (up to kPanel).
template <DType T>
void pack_panel(const void* src, int64_t row_stride, const int32_t* rows, size_t count, size_t n0, size_t kc,
                float* a_panel) {
  for (size_t half = 0; half < kPanel; half += 16) {
    const size_t n = count > half ? (count - half < 16 ? count - half : 16) : 0;
    if (n == 0) {
      for (size_t p = 0; p < kc; ++p) _mm512_store_ps(a_panel + p * kPanel + half, _mm512_setzero_ps());
      continue;
    }
    int64_t offsets[16];
    for (size_t r = 0; r < n; ++r) offsets[r] = static_cast<int64_t>(rows[half + r]) * row_stride;
    transpose_rows<T>(src, offsets, n, n0, kc, a_panel + half, kPanel, 0xffff);
  }
}

// W[c][p] = weight_g[k0 + c, n0 + p], rows >= count zero.
template <DType T>
void copy_strip(const void* src, int64_t k_stride, size_t k0, size_t count, size_t n0, size_t kc, float* w_strip) {
  int64_t offsets[kStrip];
  for (size_t c = 0; c < count; ++c) offsets[c] = static_cast<int64_t>(k0 + c) * k_stride;
  copy_rows<T>(src, offsets, count, kStrip, n0, kc, w_strip, kStripLd);
}

}  // namespace

const PackGatheredRowsFn pack_panel_32__avx512f[kNumDTypes] = {pack_panel<DType::kF32>, pack_panel<DType::kF16>,
                                                               pack_panel<DType::kBF16>};
const RowvecCopyStripFn copy_strip_14__avx512f[kNumDTypes] = {copy_strip<DType::kF32>, copy_strip<DType::kF16>,
                                                              copy_strip<DType::kBF16>};

}  // namespace moegrad::kernels::avx512
