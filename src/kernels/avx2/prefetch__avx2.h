// The micro-kernels' software prefetchers and strip stager
// (kernels/prefetchers.inc) for the AVX2 kernels.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx2 {
namespace {

// One cache line of f32 from src into a strip row (32-byte aligned).
__attribute__((always_inline)) inline void copy_line(float* dst, const std::byte* src) {
  _mm256_store_ps(dst, _mm256_loadu_ps(reinterpret_cast<const float*>(src)));
  _mm256_store_ps(dst + 8, _mm256_loadu_ps(reinterpret_cast<const float*>(src) + 8));
}

#include "kernels/prefetchers.inc"

}  // namespace
}  // namespace moegrad::kernels::avx2
