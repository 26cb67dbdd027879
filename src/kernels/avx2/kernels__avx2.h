// AVX2 + FMA + F16C kernels (compiled with those flags only in this folder).
// Same arithmetic as the scalar path, 8 lanes at a time.
#pragma once

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx2 {

inline constexpr size_t kMR = 6;
inline constexpr size_t kNR = 16;

void f32_gemm_ukernel_6x16__avx2(size_t kc, const float* a_packed, const float* b_packed, float* c,
                                 size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                 const PrefetchRows& prefetch);
extern const PackAFn pack_a_6__avx2[kNumDTypes];
extern const PackBFn pack_b_16__avx2[kNumDTypes];
void f32_add_row__avx2(float* dst, const float* src, size_t n);
void f32_start_row__avx2(float* dst, const float* src, size_t n);

// The row-vector engine: 6 weight rows x 16 grad_y rows. A strip row is
// kStripLd floats (kMaxStripKc plus one cache line, so the 6 rows of a strip
// fall in different L1 sets).
inline constexpr size_t kStrip = 6;
inline constexpr size_t kPanel = 16;
inline constexpr size_t kMaxStripKc = 256;
inline constexpr size_t kStripLd = kMaxStripKc + 16;

void f32_rowvec_ukernel_6x16__avx2(size_t kc, const float* w_strip, const float* a_panel, float* ct, size_t ldct,
                                   size_t rows, size_t cols, bool accumulate, const NextStrip& next);
extern const PackGatheredRowsFn pack_panel_16__avx2[kNumDTypes];
extern const RowvecCopyStripFn copy_strip_6__avx2[kNumDTypes];
void f32_add_cols__avx2(const float* ct, size_t ldct, size_t rows, size_t cols, float* dst, int64_t dst_stride,
                        const int32_t* tokens, bool add, const uint8_t* starts);

// The packed engine's tile with A as 6 copied rows, [kMR][kRowsALd].
inline constexpr size_t kRowsALd = kStripLd;
void f32_gemm_ukernel_6x16_rows_a__avx2(size_t kc, const float* a_rows, const float* b_packed, float* c, size_t ldc,
                                        size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                        const PrefetchRows& prefetch);
// The same with B read in place, by B's dtype: 16 columns of rows ldb
// elements apart, widened to f32 and also stored packed to b_packed (32-byte
// aligned) unless it is null.
extern const InPlaceBUkernelFn gemm_ukernel_6x16_rows_a_in_place_b__avx2[kNumDTypes];
extern const PackGatheredRowsFn pack_a_rows_6__avx2[kNumDTypes];

}  // namespace moegrad::kernels::avx2
