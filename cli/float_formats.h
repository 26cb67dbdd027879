// The three element formats `moegrad run` generates, and the CLI's own exact
// conversions. They are deliberately independent of the library's widening
// code so that the float64 reference does not share a bug with what it checks.
#pragma once

#include <dlpack/dlpack.h>

#include <bit>
#include <cstdint>

namespace moegrad::cli {

enum class FloatFormat : uint8_t { kF32, kF16, kBF16 };

inline const char* format_name(FloatFormat f) {
  switch (f) {
    case FloatFormat::kF32:
      return "f32";
    case FloatFormat::kF16:
      return "f16";
    case FloatFormat::kBF16:
      return "bf16";
  }
  return "?";
}

inline int format_bytes(FloatFormat f) { return f == FloatFormat::kF32 ? 4 : 2; }

inline DLDataType format_dl_dtype(FloatFormat f) {
  switch (f) {
    case FloatFormat::kF32:
      return {kDLFloat, 32, 1};
    case FloatFormat::kF16:
      return {kDLFloat, 16, 1};
    case FloatFormat::kBF16:
      return {kDLBfloat, 16, 1};
  }
  return {kDLFloat, 32, 1};
}

// Round to nearest even, in integer arithmetic (F. Giesen's float_to_half_fast3_rtne):
// the compiler's _Float16 conversion is a libgcc call without F16C, ~10x
// slower, which matters for the 880M-element default weight.
inline uint16_t f32_to_f16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint32_t h;
  if (x >= 0x47800000u) {  // >= 2^16 rounds to inf; NaN stays NaN
    h = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (x < 0x38800000u) {  // below 2^-14: f16 subnormal or zero
    // Adding 0.5f aligns the value so the FPU's own round-to-nearest-even
    // rounds it at the f16 subnormal ulp (2^-24).
    const float shifted = std::bit_cast<float>(x) + 0.5f;
    h = std::bit_cast<uint32_t>(shifted) - 0x3f000000u;
  } else {
    const uint32_t mantissa_odd = (x >> 13) & 1u;
    x += 0xc8000fffu;   // rebias exponent 127 -> 15 ((15 - 127) << 23, wraps) + half ulp - 1
    x += mantissa_odd;  // ties to even
    h = x >> 13;
  }
  return static_cast<uint16_t>(h | (sign >> 16));
}

// Round to nearest even on the top 16 bits. Our inputs are finite (no NaN
// quieting needed).
inline uint16_t f32_to_bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_bits_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline float f16_bits_to_f32(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

}  // namespace moegrad::cli
