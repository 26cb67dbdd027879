#include <immintrin.h>

#include "kernels/avx2/kernels__avx2.h"

namespace moegrad::kernels::avx2 {
namespace {

// Lane j active iff j < n (n clamped to [0, 8]), as maskload/maskstore want.
inline __m256i lane_mask(size_t n) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int nn = n > 8 ? 8 : static_cast<int>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(nn), iota);
}

}  // namespace

// 12 accumulators (6 rows x 2 vectors of 8 columns), 2 B vectors, 1 broadcast.
// C[r, c] = fma(A[p][r], B[p][c], C[r, c]) for p = 0..kc-1.
void f32_gemm_ukernel_6x16__avx2(size_t kc, const float* a_packed, const float* b_packed, float* c,
                                 size_t ldc, size_t mr, size_t nr, bool accumulate) {
  const __m256i m0 = lane_mask(nr);
  const __m256i m1 = lane_mask(nr > 8 ? nr - 8 : 0);
  __m256 acc0[kMR], acc1[kMR];
#pragma GCC unroll 6
  for (size_t r = 0; r < kMR; ++r) {
    acc0[r] = _mm256_setzero_ps();
    acc1[r] = _mm256_setzero_ps();
  }
  // Unrolled with a guard so the accumulators never leave registers.
  if (accumulate) {
#pragma GCC unroll 6
    for (size_t r = 0; r < kMR; ++r) {
      if (r >= mr) break;
      acc0[r] = _mm256_maskload_ps(c + r * ldc, m0);
      acc1[r] = _mm256_maskload_ps(c + r * ldc + 8, m1);
    }
  }
  for (size_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(b_packed);
    const __m256 b1 = _mm256_load_ps(b_packed + 8);
#pragma GCC unroll 6
    for (size_t r = 0; r < kMR; ++r) {
      const __m256 a = _mm256_broadcast_ss(a_packed + r);
      acc0[r] = _mm256_fmadd_ps(a, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(a, b1, acc1[r]);
    }
    a_packed += kMR;
    b_packed += kNR;
  }
#pragma GCC unroll 6
  for (size_t r = 0; r < kMR; ++r) {
    if (r < mr) {
      _mm256_maskstore_ps(c + r * ldc, m0, acc0[r]);
      _mm256_maskstore_ps(c + r * ldc + 8, m1, acc1[r]);
    }
  }
}

void f32_add_row__avx2(float* dst, const float* src, size_t n) {
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(dst + j, _mm256_add_ps(_mm256_loadu_ps(dst + j), _mm256_loadu_ps(src + j)));
  for (; j < n; ++j) dst[j] += src[j];
}

}  // namespace moegrad::kernels::avx2
