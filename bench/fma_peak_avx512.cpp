// Compiled with -mavx512f -mfma; called only when the CPU has AVX-512F.
#include <immintrin.h>

#include "fma_loop.h"
#include "fma_peak.h"

namespace moegrad::bench {
namespace {

struct Avx512Ops {
  using V = __m512;
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fma(V acc, V a, V b) { return _mm512_fmadd_ps(acc, a, b); }
  static V add(V x, V y) { return _mm512_add_ps(x, y); }
};

}  // namespace

// 28 zmm chains: an FMA has ~4 cycles of latency on two pipes, so >= 8 in
// flight saturate them; 28 (plus the two operands) fill the register file
// without spilling and hide any scheduling hiccup.
uint64_t fma_loop_avx512(uint64_t iterations, float a, float b, float* sink) {
  return fma_loop<Avx512Ops, 28>(iterations, a, b, sink);
}

}  // namespace moegrad::bench
