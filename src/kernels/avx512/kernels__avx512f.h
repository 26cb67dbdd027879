// AVX-512F kernels (compiled with -mavx512f -mfma -mf16c only in this folder).
// Same arithmetic as the scalar path, 16 lanes at a time.
#pragma once

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx512 {

inline constexpr size_t kMR = 14;
inline constexpr size_t kNR = 32;

void f32_gemm_ukernel_14x32__avx512f(size_t kc, const float* a_packed, const float* b_packed,
                                     float* c, size_t ldc, size_t mr, size_t nr, bool accumulate);
extern const PackAFn pack_a_14__avx512f[kNumDTypes];
extern const PackBFn pack_b_32__avx512f[kNumDTypes];
void f32_add_row__avx512f(float* dst, const float* src, size_t n);

}  // namespace moegrad::kernels::avx512
