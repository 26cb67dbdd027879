// The fast bf16 mode's order (README, "Fast bf16 mode"), written out from
// its definition for the tests, apart from the library's emulation
// (src/kernels/scalar/bf16_pairs__scalar.cpp): the terms a(t) * b(t), t <
// terms, padded with one zero term to even length, then for each pair m
// ascending, term 2m+1 and then term 2m, each an fp32 FMA into the sum,
// from +0.0 (or `start`). The padding is a term like the others:
// fma(+0, +0, acc) is acc except for acc = -0, which it turns into +0
// (-0 + +0 rounds to +0). Every input that is denormal reads as a zero of
// its sign; every result that is tiny becomes a zero of its sign,
// tininess detected after rounding as on x86: the exact value, rounded to
// nearest-even with 24 bits and an unbounded exponent, is below 2^-126 -
// that is, the exact value is below 2^-126 - 2^-151 in magnitude (at that
// midpoint the tie goes to 2^-126, whose significand is even).
#pragma once

#include <cmath>
#include <cstdint>

namespace mgt {

inline float flushed(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }

// fma(a, b, c) with x86's flush to zero. The exact a*b + c is held as the
// double sum s plus its error e (a*b is exact in a double: two 8-bit
// significands; Knuth's two-sum adds c without loss), and compared with
// the midpoint, which is a double.
inline float fma_flushed(float a, float b, float c) {
  const float r = std::fma(a, b, c);
  const double p = static_cast<double>(a) * b, s = p + c, c_part = s - p;
  const double e = (p - (s - c_part)) + (c - c_part);
  if (!std::isfinite(s)) return r;
  const double magnitude = std::fabs(s), below = s < 0 ? e : -e;  // below > 0: |exact| < magnitude
  constexpr double kMidpoint = 0x1p-126 - 0x1p-151;
  return magnitude < kMidpoint || (magnitude == kMidpoint && below > 0) ? std::copysign(0.0f, r) : r;
}

template <typename A, typename B>
float fast_bf16_chain(int64_t terms, A a, B b, float start = 0.0f) {
  float acc = start;
  for (int64_t m = 0; 2 * m < terms; ++m) {
    const bool padded = 2 * m + 1 == terms;
    acc = fma_flushed(padded ? 0.0f : flushed(a(2 * m + 1)), padded ? 0.0f : flushed(b(2 * m + 1)), flushed(acc));
    acc = fma_flushed(flushed(a(2 * m)), flushed(b(2 * m)), flushed(acc));
  }
  return acc;
}

}  // namespace mgt
