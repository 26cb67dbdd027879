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

// binary32 -> binary16, round to nearest even in integer arithmetic (the
// compiler's _Float16 is a slow libgcc call without F16C, and clang 14 has no
// _Float16 on x86 at all). Overflow gives infinity; a NaN is quieted and keeps
// its sign and top payload bits, as F16C's vcvtps2ph does.
inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint32_t h;
  if (x > 0x7f800000u) {
    h = 0x7e00u | ((x >> 13) & 0x3ffu);
  } else if (x >= 0x47800000u) {  // >= 65536 (2^16); [65520, 65536) carries into infinity below
    h = 0x7c00u;
  } else if (x < 0x38800000u) {  // below 2^-14: subnormal or zero
    // Adding 0.5f puts the f16 subnormal ulp (2^-24) at the f32 ulp of 0.5,
    // so the FPU's own round-to-nearest-even does the rounding.
    float v;
    std::memcpy(&v, &x, sizeof v);
    v += 0.5f;
    uint32_t r;
    std::memcpy(&r, &v, sizeof r);
    h = r - 0x3f000000u;
  } else {
    const uint32_t mantissa_odd = (x >> 13) & 1u;
    x += 0xc8000fffu;  // rebias 127 -> 15 ((15 - 127) << 23, wrapping) + half ulp - 1
    x += mantissa_odd;  // ties to even
    h = x >> 13;
  }
  return static_cast<uint16_t>(h | (sign >> 16));
}

}  // namespace moegrad
