// The row-vector engine's tile (14 weight rows x 16*V + 8*Half grad_y rows,
// Ct[c][r]) as the f32 and bf16-pair micro-kernels keep it: per weight row,
// V zmm vectors of 16 rows and, for a short last panel, one ymm vector of 8
// more (a ymm FMA is half a zmm one where AVX-512 runs in two 256-bit
// halves). Internal linkage and always inlined, like CTile
// (c_tile__avx512f.h).
#pragma once

#include <cstddef>

#include "kernels/avx512/intrinsics__avx512f.h"

namespace moegrad::kernels::avx512 {
namespace {

template <size_t Rows, size_t V, bool Half>
struct CtTile {
  static constexpr size_t kZ = V > 0 ? V : 1;  // storage only: V of them are used
  __m512 z[Rows][kZ];
  __m256 y[Rows];

  // +0.0 (every chain's start), or Ct rows c < cols when accumulating over a
  // further reduction block. Unrolled so the tile stays in registers.
  __attribute__((always_inline)) CtTile(const float* ct, size_t ldct, size_t cols, bool accumulate) {
#pragma GCC unroll 16
    for (size_t c = 0; c < Rows; ++c) {
      const bool load = accumulate && c < cols;
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) z[c][v] = load ? _mm512_loadu_ps(ct + c * ldct + 16 * v) : _mm512_setzero_ps();
      if constexpr (Half) y[c] = load ? _mm256_loadu_ps(ct + c * ldct + 16 * V) : _mm256_setzero_ps();
    }
  }

  __attribute__((always_inline)) void store(float* ct, size_t ldct, size_t cols) const {
#pragma GCC unroll 16
    for (size_t c = 0; c < Rows; ++c) {
      if (c >= cols) break;
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) _mm512_storeu_ps(ct + c * ldct + 16 * v, z[c][v]);
      if constexpr (Half) _mm256_storeu_ps(ct + c * ldct + 16 * V, y[c]);
    }
  }
};

// Calls tile<V, Half>() for the narrowest vectors that hold `rows` (<= 32)
// rows: 8, 16, 24 or 32.
template <class Tile>
__attribute__((always_inline)) inline void for_tail_rows(size_t rows, Tile tile) {
  if (rows > 24) {
    tile.template operator()<2, false>();
  } else if (rows > 16) {
    tile.template operator()<1, true>();
  } else if (rows > 8) {
    tile.template operator()<1, false>();
  } else {
    tile.template operator()<0, true>();
  }
}

}  // namespace
}  // namespace moegrad::kernels::avx512
