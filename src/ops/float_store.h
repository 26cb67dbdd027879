// Storing the layer operators' f32 results: rounded once to an output dtype
// (round to nearest even), the only narrowing in moegrad (the forward y and
// d_weight in f16/bf16), and every NaN stored as the canonical NaN
// (common/canonical_nan.h; f16 0x7e00, bf16 0x7fc0).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "common/canonical_nan.h"
#include "common/dtype.h"

namespace moegrad::ops {

using moegrad::f32_to_f16;  // round to nearest even (common/dtype.h)

// bfloat16: round to nearest even on the top 16 bits; a NaN is quieted and
// keeps its sign (the carry of the rounding must not turn it into infinity).
inline uint16_t f32_to_bf16(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// dst[j * stride] = src[j] rounded to t, j < n (element strides).
inline void store_row(DType t, void* dst, int64_t stride, const float* src, size_t n) {
  if (t == DType::kF32) {
    float* d = static_cast<float*>(dst);
    for (size_t j = 0; j < n; ++j) d[static_cast<int64_t>(j) * stride] = canonical_nan(src[j]);
    return;
  }
  uint16_t* d = static_cast<uint16_t*>(dst);
  if (t == DType::kF16) {
    for (size_t j = 0; j < n; ++j) d[static_cast<int64_t>(j) * stride] = f32_to_f16(canonical_nan(src[j]));
  } else {
    for (size_t j = 0; j < n; ++j) d[static_cast<int64_t>(j) * stride] = f32_to_bf16(canonical_nan(src[j]));
  }
}

// dst[j * stride] += src[j], j < n: one f32 add per element.
inline void add_row_strided(float* dst, int64_t stride, const float* src, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    float& d = dst[static_cast<int64_t>(j) * stride];
    d = canonical_nan(d + src[j]);
  }
}

// The address of element `offset` of a buffer of t.
inline void* element_at(void* base, DType t, int64_t offset) {
  return static_cast<std::byte*>(base) + offset * dtype_bytes(t);
}
inline const void* element_at(const void* base, DType t, int64_t offset) {
  return static_cast<const std::byte*>(base) + offset * dtype_bytes(t);
}

}  // namespace moegrad::ops

namespace moegrad::ops {

// dst[j] = src[j * stride] widened exactly to f32, j < n.
inline void load_row(DType t, const void* src, int64_t stride, float* dst, size_t n) {
  if (t == DType::kF32) {
    const float* s = static_cast<const float*>(src);
    for (size_t j = 0; j < n; ++j) dst[j] = s[static_cast<int64_t>(j) * stride];
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (t == DType::kF16) {
    for (size_t j = 0; j < n; ++j) dst[j] = f16_to_f32(s[static_cast<int64_t>(j) * stride]);
  } else {
    for (size_t j = 0; j < n; ++j) dst[j] = bf16_to_f32(s[static_cast<int64_t>(j) * stride]);
  }
}

}  // namespace moegrad::ops
