// AVX2 + FMA + F16C kernels (compiled with those flags only in this folder).
// Same arithmetic as the scalar path, 8 lanes at a time.
#pragma once

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx2 {

inline constexpr size_t kMR = 6;
inline constexpr size_t kNR = 16;

void f32_gemm_ukernel_6x16__avx2(size_t kc, const float* a_packed, const float* b_packed, float* c,
                                 size_t ldc, size_t mr, size_t nr, bool accumulate);
extern const PackAFn pack_a_6__avx2[kNumDTypes];
extern const PackBFn pack_b_16__avx2[kNumDTypes];
void f32_add_row__avx2(float* dst, const float* src, size_t n);

}  // namespace moegrad::kernels::avx2
