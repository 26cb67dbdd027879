// The per-ISA kernel table. The driver only ever calls kernels through it, so
// the loops are written once and every ISA path computes the same arithmetic:
//
//   C[r, c] = (accumulate ? C[r, c] : +0.0f), then for p = 0..kc-1:
//   C[r, c] = fma(A[p][r], B[p][c], C[r, c])
//
// i.e. each output element is one sequential f32 FMA chain (SPEC §5), whatever
// the register blocking; carrying C across kc blocks through memory does not
// change a single bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "moegrad/moegrad.h"

namespace moegrad::kernels {

// One MR x NR tile of C from packed panels: a_packed is [kc][MR], b_packed is
// [kc][NR] (zero-padded beyond mr / nr). Only the mr x nr corner of C is read
// (when accumulating) and written. c is row-major with leading dimension ldc.
using GemmUkernelFn = void (*)(size_t kc, const float* a_packed, const float* b_packed, float* c,
                               size_t ldc, size_t mr, size_t nr, bool accumulate);

// Packs grad_y rows rows[0..mr), columns [n0, n0 + kc) as A[p][MR], widened to
// f32, rows mr..MR-1 zero. Element (i, n) lives at src + i*row_stride + n*col_stride
// (strides in elements).
using PackAFn = void (*)(const void* src, int64_t row_stride, int64_t col_stride,
                         const int32_t* rows, size_t mr, size_t n0, size_t kc, float* a_packed);

// Packs weight[g] rows k in [k0, k0 + nr), columns n in [n0, n0 + kc) as
// B[p][NR] = weight[g][k0 + c][n0 + p], widened to f32, columns nr..NR-1 zero.
using PackBFn = void (*)(const void* src, int64_t k_stride, int64_t n_stride, size_t k0, size_t nr,
                         size_t n0, size_t kc, float* b_packed);

// dst[j] += src[j] for j < n: one f32 add per element, the scatter-add step.
using AddRowFn = void (*)(float* dst, const float* src, size_t n);

struct GemmKernels {
  moegrad_isa isa;
  size_t mr;
  size_t nr;
  GemmUkernelFn ukernel;
  PackAFn pack_a[kNumDTypes];  // indexed by DType
  PackBFn pack_b[kNumDTypes];
  AddRowFn add_row;
};

// The table for an ISA (never AUTO); nullptr if this CPU cannot run it.
const GemmKernels* gemm_kernels_for(moegrad_isa isa);

// The best ISA this CPU runs.
moegrad_isa best_isa();

// The fast bf16 mode's table for an ISA: the scalar emulation, or the
// AVX512_BF16 kernel for AVX512 on a CPU that has it; nullptr otherwise.
// Its panels hold bf16 pairs, and kc blocks other than the last must be even.
const GemmKernels* bf16_pair_kernels_for(moegrad_isa isa);

namespace scalar {
const GemmKernels& gemm_kernels();
const GemmKernels& bf16_pair_kernels();
}  // namespace scalar
namespace avx2 { const GemmKernels& gemm_kernels(); }
namespace avx512 { const GemmKernels& gemm_kernels(); }
namespace avx512bf16 { const GemmKernels& bf16_pair_kernels(); }

}  // namespace moegrad::kernels
