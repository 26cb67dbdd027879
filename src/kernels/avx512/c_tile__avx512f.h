// The 14 x 32 C tile that the AVX-512 micro-kernels (f32 and bf16 pairs) keep
// in 28 zmm registers: how it starts and how it is stored. Internal linkage
// and always inlined, so each micro-kernel keeps the tile in registers and
// each translation unit (possibly with extra -m flags) has its own copy.
#pragma once

#include <cstddef>

#include "kernels/avx512/canonical_nan__avx512f.h"
#include "kernels/avx512/intrinsics__avx512f.h"

namespace moegrad::kernels::avx512 {
namespace {

inline __mmask16 lane_mask(size_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}

template <size_t MR>
struct CTile {
  __m512 lo[MR], hi[MR];  // columns 0-15 and 16-31 of each row
  __mmask16 m_lo, m_hi;   // the nr valid columns

  // +0.0 everywhere (every chain starts at +0.0, SPEC §5), or the mr x nr
  // corner of c when accumulating over a further reduction block.
  __attribute__((always_inline)) CTile(const float* c, size_t ldc, size_t mr, size_t nr, bool accumulate)
      : m_lo(lane_mask(nr)), m_hi(lane_mask(nr > 16 ? nr - 16 : 0)) {
#pragma GCC unroll 16
    for (size_t r = 0; r < MR; ++r) {
      lo[r] = _mm512_setzero_ps();
      hi[r] = _mm512_setzero_ps();
    }
    if (!accumulate) return;
    // Unrolled with a guard (not a run-time trip count) so the tile never
    // leaves registers.
#pragma GCC unroll 16
    for (size_t r = 0; r < MR; ++r) {
      if (r >= mr) break;
      lo[r] = _mm512_maskz_loadu_ps(m_lo, c + r * ldc);
      hi[r] = _mm512_maskz_loadu_ps(m_hi, c + r * ldc + 16);
    }
  }

  // canonical_nans: every NaN as the canonical one (GemmUkernelFn).
  __attribute__((always_inline)) void store(float* c, size_t ldc, size_t mr, bool canonical_nans) {
    if (canonical_nans) {
#pragma GCC unroll 16
      for (size_t r = 0; r < MR; ++r) {
        lo[r] = canonical_nan(lo[r]);
        hi[r] = canonical_nan(hi[r]);
      }
    }
#pragma GCC unroll 16
    for (size_t r = 0; r < MR; ++r) {
      if (r < mr) {
        _mm512_mask_storeu_ps(c + r * ldc, m_lo, lo[r]);
        _mm512_mask_storeu_ps(c + r * ldc + 16, m_hi, hi[r]);
      }
    }
  }
};

// Calls run.template operator()<R>() with R the smallest of 4, 8 and 14
// rows that holds mr: a call for a short micro-panel (an expert's last
// rows) computes only a few more rows than it has, not all 14 (each row's
// chain reads only its own row of A, so the rows it computes keep their
// bits).
template <class Run>
__attribute__((always_inline)) inline void with_tile_rows(size_t mr, Run&& run) {
  if (mr > 8) {
    run.template operator()<14>();
  } else if (mr > 4) {
    run.template operator()<8>();
  } else {
    run.template operator()<4>();
  }
}

}  // namespace
}  // namespace moegrad::kernels::avx512
