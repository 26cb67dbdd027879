// Portable kernels: the executable definition of SPEC §5's order. Every
// SIMD path must reproduce these bits exactly.
#pragma once

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::scalar {

inline constexpr size_t kMR = 4;
inline constexpr size_t kNR = 8;

void f32_gemm_ukernel_4x8__scalar(size_t kc, const float* a_packed, const float* b_packed, float* c,
                                  size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                  const PrefetchRows&);
extern const PackAFn pack_a_4__scalar[kNumDTypes];
extern const PackBFn pack_b_8__scalar[kNumDTypes];
void f32_add_row__scalar(float* dst, const float* src, size_t n);
void f32_start_row__scalar(float* dst, const float* src, size_t n);

}  // namespace moegrad::kernels::scalar
