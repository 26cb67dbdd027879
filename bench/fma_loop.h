// The FMA-throughput loop, written once for any vector ISA: `kChains`
// independent chains acc = acc*a + b that never touch memory. Instantiated in
// one translation unit per ISA (fma_peak_avx512.cpp, fma_peak_avx2.cpp), each
// compiled with exactly that ISA's flags, with an Ops struct of its intrinsics:
//   using V; V set1(float); V fma(V acc, V a, V b); V add(V, V).
#pragma once

#include <cstdint>
#include <cstring>

namespace moegrad::bench {

template <class Ops, int kChains>
uint64_t fma_loop(uint64_t iterations, float a, float b, float* sink) {
  using V = typename Ops::V;
  const V va = Ops::set1(a), vb = Ops::set1(b);
  V acc[kChains];
#pragma GCC unroll 32
  for (int j = 0; j < kChains; ++j) acc[j] = Ops::set1(static_cast<float>(j));
  for (uint64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 32
    for (int j = 0; j < kChains; ++j) acc[j] = Ops::fma(acc[j], va, vb);
  }
  V total = acc[0];
#pragma GCC unroll 32
  for (int j = 1; j < kChains; ++j) total = Ops::add(total, acc[j]);
  constexpr int kLanes = sizeof(V) / sizeof(float);
  float lanes[kLanes];
  std::memcpy(lanes, &total, sizeof total);
  float sum = 0.0f;
  for (const float x : lanes) sum += x;
  *sink = sum;
  return iterations * static_cast<uint64_t>(kChains * kLanes * 2);
}

}  // namespace moegrad::bench
