// The fast bf16 mode's order (README, "Fast bf16 mode"), written out from
// its definition for the tests, apart from the library's emulation
// (src/kernels/scalar/bf16_pairs__scalar.cpp): the terms a(t) * b(t), t <
// terms, padded with one zero term to even length, then for each pair m
// ascending, term 2m+1 and then term 2m, each an fp32 FMA into the sum,
// every input and every result flushed (a denormal becomes a zero of its
// sign), from +0.0. (A missing pair element is a zero term: fma(0, 0, acc)
// is acc, so the loop skips it.)
#pragma once

#include <cmath>
#include <cstdint>

namespace mgt {

inline float flushed(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }

template <typename A, typename B>
float fast_bf16_chain(int64_t terms, A a, B b) {
  float acc = 0.0f;
  for (int64_t m = 0; 2 * m < terms; ++m) {
    if (2 * m + 1 < terms) acc = flushed(std::fma(flushed(a(2 * m + 1)), flushed(b(2 * m + 1)), flushed(acc)));
    acc = flushed(std::fma(flushed(a(2 * m)), flushed(b(2 * m)), flushed(acc)));
  }
  return acc;
}

}  // namespace mgt
