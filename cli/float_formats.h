// The three element formats `moegrad run` generates, and the CLI's own exact
// conversions. They are deliberately independent of the library's widening
// code so that the float64 reference does not share a bug with what it checks.
#pragma once

#include <dlpack/dlpack.h>

#include <bit>
#include <cstdint>
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

inline float f16_bits_to_f32(uint16_t h) { return moegrad::f16_to_f32(h); }

}  // namespace moegrad::cli
