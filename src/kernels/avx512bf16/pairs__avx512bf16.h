// Shared by the fast bf16 mode's AVX512_BF16 kernels: loading bf16 pairs
// (one 32-bit word holds elements 2m and 2m+1 of a row, as vdpbf16ps reads
// them). Only for translation units compiled with -mavx512bf16.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/avx512/intrinsics__avx512f.h"
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

// Rows i < count of raw bf16 (row i at base + offsets[i], from element n0)
// as pair words: out[i * ld + m] = pair (2m, 2m+1), kc elements, an odd kc
// padded with a zero element; rows count..rows_out-1 zero.
inline void copy_pair_rows(const uint16_t* base, const int64_t* offsets, size_t count, size_t rows_out, size_t n0,
                           size_t kc, float* out, size_t ld) {
  const size_t pairs = (kc + 1) / 2;
  for (size_t i = 0; i < rows_out; ++i) {
    float* dst = out + i * ld;
    if (i >= count) {
      for (size_t m = 0; m < pairs; m += 16) _mm512_storeu_ps(dst + m, _mm512_setzero_ps());
      continue;
    }
    const uint16_t* row = base + offsets[i] + static_cast<int64_t>(n0);
    for (size_t m = 0; m < pairs; m += 16) _mm512_storeu_ps(dst + m, load_pairs(row, 2 * m, kc));
  }
}

}  // namespace

// The row-vector engine in the fast bf16 order (kernels/gemm_kernels.h):
// weight pairs copied into strips, grad_y pairs transposed into panels
// (bf16_pairs_rowvec__avx512bf16.cpp).
extern const RowvecKernels kPairRowvecKernels;

}  // namespace moegrad::kernels::avx512bf16
