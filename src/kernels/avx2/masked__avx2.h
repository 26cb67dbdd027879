// Loads and stores of a vector's first n lanes (n <= 8) that touch no page
// those lanes do not.
//
// VMASKMOVPS never faults on a masked-off lane by Intel's definition, but
// AMD's manual leaves that to the implementation (it "may signal ... a page
// fault for doublewords that are zero-masked"), and AVX2 is the path every
// AMD CPU without AVX-512 runs. A tail of a caller's row (grad_x, y,
// grad_weight) or of the workspace may end at the end of a mapping. So a
// partial access uses the instruction only where all 32 bytes lie in one
// 4 KiB page, which the first lane's own access shows to be mapped; across
// a page end it goes through a buffer on the stack (as widen__avx2.h's
// partial loads always do). A whole vector needs no mask, and none is used.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/avx2/widen__avx2.h"

namespace moegrad::kernels::avx2 {
// Internal linkage, as widen__avx2.h's: a copy per translation unit, never
// one the linker could pick for code built without AVX2.
namespace {

inline bool vector_in_one_page(const float* p) {
  return (reinterpret_cast<uintptr_t>(p) & uintptr_t{4095}) <= uintptr_t{4096 - sizeof(__m256)};
}

// Lane j = p[j] for j < n, +0.0f beyond.
inline __m256 load_first(const float* p, size_t n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  if (n == 0) return _mm256_setzero_ps();
  if (vector_in_one_page(p)) return _mm256_maskload_ps(p, lane_mask(n));
  return load_partial_widened<DType::kF32>(p, 0, n);
}

// p[j] = lane j for j < n; p[j] beyond is not written.
inline void store_first(float* p, size_t n, __m256 v) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
  } else if (n > 0 && vector_in_one_page(p)) {
    _mm256_maskstore_ps(p, lane_mask(n), v);
  } else if (n > 0) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    std::memcpy(p, lanes, n * sizeof(float));
  }
}

}  // namespace
}  // namespace moegrad::kernels::avx2
