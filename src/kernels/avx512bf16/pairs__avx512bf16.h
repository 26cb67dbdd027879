// Shared by the fast bf16 mode's AVX512_BF16 kernels: loading bf16 pairs
// (one 32-bit word holds elements 2m and 2m+1 of a row, as vdpbf16ps reads
// them). Only for translation units compiled with -mavx512bf16.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx512bf16 {
namespace {

// 16 pair-words of one row, from element n (even) on; elements at or past
// `end` read as zero (an odd reduction is padded with one zero).
inline __m512 load_pairs(const uint16_t* row, size_t n, size_t end) {
  if (n + 32 <= end) return _mm512_loadu_ps(row + n);
  alignas(64) uint16_t tmp[32] = {};
  for (size_t i = 0; n + i < end; ++i) tmp[i] = row[n + i];
  return _mm512_load_ps(tmp);
}

}  // namespace

// The row-vector engine in the fast bf16 order (kernels/gemm_kernels.h):
// weight pairs copied into strips, grad_y pairs transposed into panels.
const RowvecKernels& bf16_pair_rowvec_kernels();

}  // namespace moegrad::kernels::avx512bf16
