// Operands of the AVX2 row-vector engine: grad_y rows transposed into
// [kc][16] panels (8x8 register transposes, widened on the way) and weight
// rows copied, not transposed, into a [6][kStripLd] strip.
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx2/kernels__avx2.h"
#include "kernels/avx2/widen__avx2.h"

namespace moegrad::kernels::avx2 {
namespace {

// A[p][r] = grad_y[rows[r], n0 + p], rows >= count zero (up to kPanel).
template <DType T>
void pack_panel(const void* src, int64_t row_stride, const int32_t* rows, size_t count, size_t n0, size_t kc,
                float* a_panel) {
  for (size_t half = 0; half < kPanel; half += 8) {
    const size_t n = count > half ? (count - half < 8 ? count - half : 8) : 0;
    if (n == 0) {
      for (size_t p = 0; p < kc; ++p) _mm256_storeu_ps(a_panel + p * kPanel + half, _mm256_setzero_ps());
      continue;
    }
    int64_t offsets[8];
    for (size_t r = 0; r < n; ++r) offsets[r] = static_cast<int64_t>(rows[half + r]) * row_stride;
    __m256 v[8];
    for (size_t p0 = 0; p0 < kc; p0 += 8) {
      const size_t q = kc - p0 < 8 ? kc - p0 : 8;
      load_rows<T>(src, offsets, n, static_cast<int64_t>(n0 + p0), q, v);
      transpose8x8(v);
      for (size_t i = 0; i < q; ++i) _mm256_storeu_ps(a_panel + (p0 + i) * kPanel + half, v[i]);
    }
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

const PackGatheredRowsFn pack_panel_16__avx2[kNumDTypes] = {pack_panel<DType::kF32>, pack_panel<DType::kF16>,
                                                            pack_panel<DType::kBF16>};
const RowvecCopyStripFn copy_strip_6__avx2[kNumDTypes] = {copy_strip<DType::kF32>, copy_strip<DType::kF16>,
                                                          copy_strip<DType::kBF16>};

}  // namespace moegrad::kernels::avx2
