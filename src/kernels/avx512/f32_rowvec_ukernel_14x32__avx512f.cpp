#include <immintrin.h>

#include "kernels/avx512/ct_tile__avx512f.h"
#include "kernels/avx512/prefetch__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"

namespace moegrad::kernels::avx512 {
namespace {

// V vectors of 16 grad_y rows x 14 weight rows: 14*V accumulators, V panel
// vectors; the weight value is an embedded broadcast from the strip (one
// base register: the strip's leading dimension is a compile-time constant).
// Ct[c][r] = fma(A[p][r], W[c][p], Ct[c][r]) for p = 0..kc-1.
template <size_t V>
__attribute__((always_inline)) inline void rowvec_tile(size_t kc, const float* w, const float* a, float* ct,
                                                       size_t ldct, size_t cols, bool accumulate,
                                                       const NextStrip& next) {
  CtTile<kStrip, V> t(ct, ldct, cols, accumulate);
  StripStager stager(next, kc);
  // The Ct tile's lines are requested again before the stores: the panel
  // streaming through L1 (32 KiB a call) and the strip copy evict them
  // (same-process A/B: zmoe 0.95-0.97x the time with 1 and 2 threads,
  // fine-grained 0.92-0.98x; no gain measured for the fast bf16 kernel,
  // whose panels are half the bytes, nor on AVX2 or the packed engine).
  TileReloader reload(ct, ldct, cols, 16 * V, kc);
  for (size_t p = 0; p < kc; ++p) {
    stager.step();
    reload.step(p);
    __m512 av[V];
#pragma GCC unroll 2
    for (size_t v = 0; v < V; ++v) av[v] = _mm512_load_ps(a + p * kPanel + 16 * v);
#pragma GCC unroll 14
    for (size_t c = 0; c < kStrip; ++c) {
      const __m512 wv = _mm512_set1_ps(w[c * kStripLd + p]);
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) t.acc[c][v] = _mm512_fmadd_ps(av[v], wv, t.acc[c][v]);
    }
  }
  stager.finish();
  t.store(ct, ldct, cols);
}

}  // namespace

void f32_rowvec_ukernel_14x32__avx512f(size_t kc, const float* w_strip, const float* a_panel, float* ct,
                                       size_t ldct, size_t rows, size_t cols, bool accumulate,
                                       const NextStrip& next) {
  // A tail of at most 16 rows runs half the FMAs.
  if (rows > 16) {
    rowvec_tile<2>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
  } else {
    rowvec_tile<1>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
  }
}

}  // namespace moegrad::kernels::avx512
