#include "kernels/avx512/ct_tile__avx512f.h"
#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/avx512/prefetch__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"

namespace moegrad::kernels::avx512 {
namespace {

// V zmm vectors of 16 grad_y rows, plus (Half) one ymm vector of 8 more,
// x 14 weight rows: 14*(V + Half) accumulators, V + Half panel vectors;
// the weight value is a broadcast from the strip (one base register: the
// strip's leading dimension is a compile-time constant).
// Ct[c][r] = fma(A[p][r], W[c][p], Ct[c][r]) for p = 0..kc-1: every lane is
// the same chain whatever its register's width, so the bits do not depend
// on how a slot's rows are split into tiles.
template <size_t V, bool Half>
__attribute__((always_inline)) inline void rowvec_tile(size_t kc, const float* w, const float* a, float* ct,
                                                       size_t ldct, size_t cols, bool accumulate,
                                                       const NextStrip& next) {
  CtTile<kStrip, V, Half> t(ct, ldct, cols, accumulate);
  StripStager stager(next, kc);
  // The Ct tile's lines are requested again before the stores: the panel
  // streaming through L1 (32 KiB a call) and the strip copy evict them
  // (same-process A/B: zmoe 0.95-0.97x the time with 1 and 2 threads,
  // fine-grained 0.92-0.98x; no gain measured for the fast bf16 kernel,
  // whose panels are half the bytes, nor on AVX2 or the packed engine).
  TileReloader reload(ct, ldct, cols, 16 * V + (Half ? 8 : 0), kc);
  for (size_t p = 0; p < kc; ++p) {
    stager.step();
    reload.step(p);
    __m512 av[t.kZ];
#pragma GCC unroll 2
    for (size_t v = 0; v < V; ++v) av[v] = _mm512_load_ps(a + p * kPanel + 16 * v);
    __m256 ay = _mm256_setzero_ps();
    if constexpr (Half) ay = _mm256_load_ps(a + p * kPanel + 16 * V);
#pragma GCC unroll 14
    for (size_t c = 0; c < kStrip; ++c) {
      // One broadcast serves both widths. Left to itself GCC folds the zmm
      // one into each FMA's memory operand and loads the ymm one apart: 30
      // loads a step for 28 FMAs, and a 24-row tail then took 1.12x a full
      // panel's time in kernel_bench on a Zen 5 (16 loads: 1.0x); the
      // empty asm makes the value a register. Where V or Half is 0 each
      // weight value has one use, so the fold stays.
      __m512 wb = _mm512_set1_ps(w[c * kStripLd + p]);
      if constexpr (V > 0 && Half) asm("" : "+v"(wb));
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) t.z[c][v] = _mm512_fmadd_ps(av[v], wb, t.z[c][v]);
      if constexpr (Half) t.y[c] = _mm256_fmadd_ps(ay, _mm512_castps512_ps256(wb), t.y[c]);
    }
  }
  stager.finish();
  t.store(ct, ldct, cols);
}

}  // namespace

void f32_rowvec_ukernel_14x32__avx512f(size_t kc, const float* w_strip, const float* a_panel, float* ct,
                                       size_t ldct, size_t rows, size_t cols, bool accumulate,
                                       const NextStrip& next) {
  // A slot's last panel runs only the 8-row vectors its rows need: a ymm FMA
  // is half a zmm one where AVX-512 is executed in two 256-bit halves (Zen
  // 4: zmoe's ~137-row experts leave tails of any length), and no more
  // where it is not.
  for_tail_rows(rows, [&]<size_t V, bool Half>() {
    rowvec_tile<V, Half>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
  });
}

}  // namespace moegrad::kernels::avx512
