// Loads of 8 elements widened to f32 (exact: F16C for f16, a shift for bf16),
// row copies, lane masks and an 8x8 transpose, for the AVX2 packing routines
// and kernels (namespace avx2 only).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "common/dtype.h"

namespace moegrad::kernels::avx2 {
// Internal linkage: each translation unit that includes this (possibly with
// extra -m flags) keeps its own copy, so the linker can never swap them.
namespace {

template <DType T>
inline __m256 load8_widened(const void* base, int64_t offset) {
  if constexpr (T == DType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + offset);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + offset));
    if constexpr (T == DType::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// The first n < 8 elements, zeros after; never reads past them.
template <DType T>
inline __m256 load_partial_widened(const void* base, int64_t offset, size_t n) {
  using Elem = std::conditional_t<T == DType::kF32, float, uint16_t>;
  alignas(32) Elem tmp[8] = {};
  const Elem* src = static_cast<const Elem*>(base) + offset;
  for (size_t i = 0; i < n; ++i) tmp[i] = src[i];
  return load8_widened<T>(tmp, 0);
}

// Up to 8 rows x q (<= 8) reduction elements from column n; rows >= count are zero.
template <DType T>
inline void load_rows(const void* src, const int64_t* row_offsets, size_t count, int64_t n, size_t q, __m256 r[8]) {
  #pragma GCC unroll 16
  for (size_t i = 0; i < 8; ++i) {
    if (i >= count) {
      r[i] = _mm256_setzero_ps();
    } else if (q == 8) {
      r[i] = load8_widened<T>(src, row_offsets[i] + n);
    } else {
      r[i] = load_partial_widened<T>(src, row_offsets[i] + n, q);
    }
  }
}

// Lane j active iff j < n (n clamped to [0, 8]), as maskload/maskstore want.
inline __m256i lane_mask(size_t n) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int nn = n > 8 ? 8 : static_cast<int>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(nn), iota);
}

// out[i*ld + p] = src[offsets[i] + n0 + p] widened, p < kc, for i < count;
// rows count..rows_out-1 zero (up to kc rounded up to 8).
template <DType T>
inline void copy_rows(const void* src, const int64_t* offsets, size_t count, size_t rows_out, size_t n0, size_t kc,
                      float* out, size_t ld) {
  for (size_t i = 0; i < rows_out; ++i) {
    float* dst = out + i * ld;
    if (i >= count) {
      for (size_t p = 0; p < kc; p += 8) _mm256_storeu_ps(dst + p, _mm256_setzero_ps());
      continue;
    }
    const int64_t row = offsets[i] + static_cast<int64_t>(n0);
    size_t p = 0;
    for (; p + 8 <= kc; p += 8) _mm256_storeu_ps(dst + p, load8_widened<T>(src, row + static_cast<int64_t>(p)));
    if (p < kc) _mm256_storeu_ps(dst + p, load_partial_widened<T>(src, row + static_cast<int64_t>(p), kc - p));
  }
}

// In-register transpose of an 8x8 f32 block: r[i] lane j <-> r[j] lane i.
inline void transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  #pragma GCC unroll 16
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  #pragma GCC unroll 16
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

}  // namespace
}  // namespace moegrad::kernels::avx2
