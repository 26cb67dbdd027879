// Element types the kernels understand, and their exact widening to f32.
#pragma once

#include <cstdint>
#include <cstring>

namespace moegrad {

enum class DType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2 };
inline constexpr int kNumDTypes = 3;

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
  }
  return "?";
}

inline int dtype_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

// bf16 is the top half of an f32: widening is a shift, exact for every value
// (NaN payloads and denormals included).
inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IEEE binary16 -> binary32, exact (every f16 value is representable in f32).
// Portable bit arithmetic; the SIMD paths use F16C, which gives the same bits.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN, payload kept (quiet bit as F16C)
    if (mant != 0) bits |= 0x00400000u;
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // f16 denormal m * 2^-24: normalise into an f32 normal.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace moegrad
