// Compiled with -mavx2 -mfma; the fallback for CPUs without AVX-512.
#include <immintrin.h>

#include "fma_loop.h"
#include "fma_peak.h"

namespace moegrad::bench {
namespace {

struct Avx2Ops {
  using V = __m256;
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fma(V acc, V a, V b) { return _mm256_fmadd_ps(acc, a, b); }
  static V add(V x, V y) { return _mm256_add_ps(x, y); }
};

}  // namespace

// 12 ymm chains (16 registers: 12 accumulators, 2 operands): enough to cover
// ~4-5 cycles of FMA latency on two pipes.
uint64_t fma_loop_avx2(uint64_t iterations, float a, float b, float* sink) {
  return fma_loop<Avx2Ops, 12>(iterations, a, b, sink);
}

}  // namespace moegrad::bench
