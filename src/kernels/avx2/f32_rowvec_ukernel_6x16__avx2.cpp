// The row-vector engine's AVX2 micro-kernel: 6 weight rows x 16 grad_y rows,
// the transpose of the packed engine's 6x16 tile. 12 ymm accumulators, 2
// panel vectors and 1 broadcast weight: 15 of the 16 registers.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/avx2/kernels__avx2.h"
#include "kernels/avx2/prefetch__avx2.h"

namespace moegrad::kernels::avx2 {
namespace {

// Ct[c][r] = fma(A[p][r], W[c][p], Ct[c][r]) for p = 0..kc-1, V vectors of
// 8 grad_y rows; Ct rows c >= cols are neither read nor written.
template <size_t V>
__attribute__((always_inline)) inline void rowvec_tile(size_t kc, const float* w, const float* a, float* ct,
                                                       size_t ldct, size_t cols, bool accumulate,
                                                       const NextStrip& next) {
  __m256 acc[kStrip][V];
#pragma GCC unroll 8
  for (size_t c = 0; c < kStrip; ++c)
#pragma GCC unroll 2
    for (size_t v = 0; v < V; ++v) acc[c][v] = _mm256_setzero_ps();
  if (accumulate) {
#pragma GCC unroll 8
    for (size_t c = 0; c < kStrip; ++c) {
      if (c >= cols) break;
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) acc[c][v] = _mm256_loadu_ps(ct + c * ldct + 8 * v);
    }
  }
  StripStager stager(next, kc);
  for (size_t p = 0; p < kc; ++p) {
    stager.step();
    __m256 av[V];
#pragma GCC unroll 2
    for (size_t v = 0; v < V; ++v) av[v] = _mm256_load_ps(a + p * kPanel + 8 * v);
#pragma GCC unroll 8
    for (size_t c = 0; c < kStrip; ++c) {
      const __m256 wv = _mm256_broadcast_ss(w + c * kStripLd + p);
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) acc[c][v] = _mm256_fmadd_ps(av[v], wv, acc[c][v]);
    }
  }
  stager.finish();
#pragma GCC unroll 8
  for (size_t c = 0; c < kStrip; ++c) {
    if (c >= cols) break;
#pragma GCC unroll 2
    for (size_t v = 0; v < V; ++v) _mm256_storeu_ps(ct + c * ldct + 8 * v, acc[c][v]);
  }
}

}  // namespace

void f32_rowvec_ukernel_6x16__avx2(size_t kc, const float* w_strip, const float* a_panel, float* ct, size_t ldct,
                                   size_t rows, size_t cols, bool accumulate, const NextStrip& next) {
  // A tail of at most 8 rows runs half the FMAs.
  if (rows > 8) {
    rowvec_tile<2>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
  } else {
    rowvec_tile<1>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
  }
}

}  // namespace moegrad::kernels::avx2
