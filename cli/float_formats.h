// The three element formats `moegrad run` generates, and the CLI's own exact
// conversions. The ones that read an element back (bf16 and f16 to f32) are
// written here from the formats' definitions, independent of the library's
// widening code, so that the float64 reference does not share a bug with what
// it checks; rounding f32 into f16 only makes inputs, whose bits the reference
// then reads, so it may use the library's.
#pragma once

#include <dlpack/dlpack.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "common/dtype.h"

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

// The format format_name() calls `name`; nullopt for any other text.
inline std::optional<FloatFormat> format_from_name(std::string_view name) {
  for (FloatFormat f : {FloatFormat::kF32, FloatFormat::kF16, FloatFormat::kBF16})
    if (name == format_name(f)) return f;
  return std::nullopt;
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

// Round to nearest even (the library's integer conversion, common/dtype.h).
inline uint16_t f32_to_f16_bits(float f) { return moegrad::f32_to_f16(f); }

// Round to nearest even on the top 16 bits. Our inputs are finite (no NaN
// quieting needed).
inline uint16_t f32_to_bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_bits_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// IEEE binary16: sign, 5 exponent bits (bias 15), 10 fraction bits. Every
// f16 value is exact in f32; subnormals are fraction * 2^-24.
inline float f16_bits_to_f32(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
  float magnitude = 0;
  if (exponent == 0x1f) {
    magnitude = fraction == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(fraction), -24);
  } else {
    magnitude = std::ldexp(static_cast<float>(1024 + fraction), exponent - 25);
  }
  return (h & 0x8000) != 0 ? -magnitude : magnitude;
}

}  // namespace moegrad::cli
