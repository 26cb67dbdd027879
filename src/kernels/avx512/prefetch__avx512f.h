// The micro-kernels' software prefetchers and strip stager
// (kernels/prefetchers.inc) for the AVX-512 kernels.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx512 {
namespace {

// One cache line of f32 from src into a strip row (64-byte aligned).
__attribute__((always_inline)) inline void copy_line(float* dst, const std::byte* src) {
  _mm512_store_ps(dst, _mm512_loadu_ps(src));
}

#include "kernels/prefetchers.inc"

}  // namespace
}  // namespace moegrad::kernels::avx512
