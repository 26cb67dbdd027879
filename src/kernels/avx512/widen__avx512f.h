// Loads of 16 elements widened to f32 (exact for f16 via F16C and for bf16 by
// a shift), and a 16x16 transpose: the building blocks of the packing
// routines (and of the copied-rows kernel's weight read in place). Only for AVX-512F translation units (namespace avx512).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/avx512/intrinsics__avx512f.h"

namespace moegrad::kernels::avx512 {
// Internal linkage: each translation unit that includes this (possibly with
// extra -m flags) keeps its own copy, so the linker can never swap them.
namespace {

template <DType T>
inline __m512 load16_widened(const void* base, int64_t offset) {
  if constexpr (T == DType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(base) + offset);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + offset));
    if constexpr (T == DType::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// The first n < 16 elements, zeros after; never reads past them.
template <DType T>
inline __m512 load_partial_widened(const void* base, int64_t offset, size_t n) {
  if constexpr (T == DType::kF32) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), static_cast<const float*>(base) + offset);
  } else {
    alignas(32) uint16_t tmp[16] = {};
    const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
    for (size_t i = 0; i < n; ++i) tmp[i] = src[i];
    return load16_widened<T>(tmp, 0);
  }
}

// Loads up to 16 rows x q (<= 16) reduction elements starting at column n of
// each row; rows >= count are zero.
template <DType T>
inline void load_rows(const void* src, const int64_t* row_offsets, size_t count, int64_t n, size_t q, __m512 r[16]) {
  #pragma GCC unroll 16
  for (size_t i = 0; i < 16; ++i) {
    if (i >= count) {
      r[i] = _mm512_setzero_ps();
    } else if (q == 16) {
      r[i] = load16_widened<T>(src, row_offsets[i] + n);
    } else {
      r[i] = load_partial_widened<T>(src, row_offsets[i] + n, q);
    }
  }
}

// In-register transpose of a 16x16 f32 block: r[i] lane j <-> r[j] lane i.
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16];
  #pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  #pragma GCC unroll 16
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  // Now r[4a + b] holds, in each 128-bit lane L, column 4L + b of rows 4a..4a+3
  // (for rows in 128-bit lane order). Two lane shuffles finish the job.
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);       // lanes 0,2 of each
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);   // lanes 1,3
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

// out[p * ld + i] = src[offsets[i] + n0 + p] (widened) for p < kc, i < 16
// (rows i >= count read as zero), storing only the lanes in `lanes`: 16
// rows at a time through the 16x16 transpose.
template <DType T>
inline void transpose_rows(const void* src, const int64_t* offsets, size_t count, size_t n0, size_t kc, float* out,
                           size_t ld, __mmask16 lanes) {
  __m512 v[16];
  for (size_t p = 0; p < kc; p += 16) {
    const size_t q = kc - p < 16 ? kc - p : 16;
    load_rows<T>(src, offsets, count, static_cast<int64_t>(n0 + p), q, v);
    transpose16x16(v);
    for (size_t j = 0; j < q; ++j) _mm512_mask_storeu_ps(out + (p + j) * ld, lanes, v[j]);
  }
}

// out[i * ld + p] = src[offsets[i] + n0 + p] (widened) for i < count,
// p < kc; rows count..rows_out-1 zero. A copy, no transpose.
template <DType T>
inline void copy_rows(const void* src, const int64_t* offsets, size_t count, size_t rows_out, size_t n0, size_t kc,
                      float* out, size_t ld) {
  for (size_t i = 0; i < rows_out; ++i) {
    float* dst = out + i * ld;
    if (i >= count) {
      for (size_t p = 0; p < kc; p += 16) _mm512_storeu_ps(dst + p, _mm512_setzero_ps());
      continue;
    }
    const int64_t row = offsets[i] + static_cast<int64_t>(n0);
    size_t p = 0;
    for (; p + 16 <= kc; p += 16) _mm512_storeu_ps(dst + p, load16_widened<T>(src, row + static_cast<int64_t>(p)));
    if (p < kc) _mm512_storeu_ps(dst + p, load_partial_widened<T>(src, row + static_cast<int64_t>(p), kc - p));
  }
}

}  // namespace
}  // namespace moegrad::kernels::avx512
