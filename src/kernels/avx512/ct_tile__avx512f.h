// The row-vector engine's tile (14 weight rows x 16*V grad_y rows, Ct[c][r])
// as the f32 and bf16-pair micro-kernels keep it in 14*V zmm registers.
// Internal linkage and always inlined, like CTile (c_tile__avx512f.h).
#pragma once

#include <immintrin.h>

#include <cstddef>

namespace moegrad::kernels::avx512 {
namespace {

template <size_t Rows, size_t V>
struct CtTile {
  __m512 acc[Rows][V];

  // +0.0 (every chain's start), or Ct rows c < cols when accumulating over a
  // further reduction block. Unrolled with guards so the tile stays in
  // registers.
  __attribute__((always_inline)) CtTile(const float* ct, size_t ldct, size_t cols, bool accumulate) {
#pragma GCC unroll 16
    for (size_t c = 0; c < Rows; ++c)
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) acc[c][v] = _mm512_setzero_ps();
    if (!accumulate) return;
#pragma GCC unroll 16
    for (size_t c = 0; c < Rows; ++c) {
      if (c >= cols) break;
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) acc[c][v] = _mm512_loadu_ps(ct + c * ldct + 16 * v);
    }
  }

  __attribute__((always_inline)) void store(float* ct, size_t ldct, size_t cols) const {
#pragma GCC unroll 16
    for (size_t c = 0; c < Rows; ++c) {
      if (c >= cols) break;
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) _mm512_storeu_ps(ct + c * ldct + 16 * v, acc[c][v]);
    }
  }
};

}  // namespace
}  // namespace moegrad::kernels::avx512
