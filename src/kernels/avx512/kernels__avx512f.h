// AVX-512F kernels (compiled with -mavx512f -mavx2 -mfma -mf16c only in this folder).
// Same arithmetic as the scalar path, 16 lanes at a time.
#pragma once

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx512 {

inline constexpr size_t kMR = 14;
inline constexpr size_t kNR = 32;

void f32_gemm_ukernel_14x32__avx512f(size_t kc, const float* a_packed, const float* b_packed,
                                     float* c, size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                     const PrefetchRows& prefetch);
extern const PackAFn pack_a_14__avx512f[kNumDTypes];
// The same tile with A as 14 copied rows, [kMR][kRowsALd].
void f32_gemm_ukernel_14x32_rows_a__avx512f(size_t kc, const float* a_rows, const float* b_packed, float* c,
                                            size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                            const PrefetchRows& prefetch);
// The same with B read in place, by B's dtype: 32 columns of rows ldb
// elements apart, widened to f32 and also stored packed to b_packed (64-byte
// aligned) unless it is null.
extern const InPlaceBUkernelFn gemm_ukernel_14x32_rows_a_in_place_b__avx512f[kNumDTypes];
extern const PackBFn pack_b_32__avx512f[kNumDTypes];
void f32_add_row__avx512f(float* dst, const float* src, size_t n);
void f32_start_row__avx512f(float* dst, const float* src, size_t n);

// The row-vector engine: 14 weight rows x 32 grad_y rows. A strip row is
// kStripLd floats (kMaxStripKc plus one cache line, so the 14 rows of a strip
// fall in different L1 sets).
inline constexpr size_t kStrip = 14;
inline constexpr size_t kPanel = 32;
inline constexpr size_t kMaxStripKc = 256;
inline constexpr size_t kStripLd = kMaxStripKc + 16;

void f32_rowvec_ukernel_14x32__avx512f(size_t kc, const float* w_strip, const float* a_panel, float* ct,
                                       size_t ldct, size_t rows, size_t cols, bool accumulate,
                                       const NextStrip& next);
// Up to kNarrowRows rows of a last panel, vectors along the strip's weight
// rows (the table's narrow_rows: the driver asks for no more).
inline constexpr size_t kNarrowRows = 12;
void f32_rowvec_narrow_ukernel_14x12__avx512f(size_t kc, const float* w_strip, const float* a_panel, float* ct,
                                              size_t ldct, size_t rows, size_t cols, bool accumulate,
                                              const NextStrip& next);
extern const PackGatheredRowsFn pack_panel_32__avx512f[kNumDTypes];
extern const RowvecCopyStripFn copy_strip_14__avx512f[kNumDTypes];
void f32_add_cols__avx512f(const float* ct, size_t ldct, size_t rows, size_t cols, float* dst, int64_t dst_stride,
                           const int32_t* tokens, bool add, const uint8_t* starts);

inline constexpr size_t kRowsALd = kStripLd;
extern const PackGatheredRowsFn pack_a_rows_14__avx512f[kNumDTypes];

}  // namespace moegrad::kernels::avx512
