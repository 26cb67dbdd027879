#include <immintrin.h>

#include "kernels/avx512/c_tile__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"
#include "kernels/avx512/prefetch__avx512f.h"

namespace moegrad::kernels::avx512 {

namespace {

// 28 accumulators (14 rows x 2 vectors of 16 columns), 2 B vectors, A
// broadcast from memory: 30 of 32 zmm registers. A[p][r] sits at
// a[p * kPStep + r * kRStep]: transposed ([kc][14]) or copied rows ([14][ld],
// a compile-time ld so every broadcast is base + constant).
// C[r, c] = fma(A[p][r], B[p][c], C[r, c]) for p = 0..kc-1.
template <size_t kPStep, size_t kRStep, class Prefetcher, bool kStridedB = false, bool kCopyB = false>
__attribute__((always_inline)) inline void tile_14x32(size_t kc, const float* a, const float* b_packed, float* c,
                                                      size_t ldc, size_t mr, size_t nr, bool accumulate,
                                                      bool canonical_nans, Prefetcher next, size_t ldb = kNR,
                                                      float* b_copy = nullptr) {
  CTile<kMR> t(c, ldc, mr, nr, accumulate);
  for (size_t p = 0; p < kc; ++p) {
    next.step();
    const __m512 b0 = kStridedB ? _mm512_loadu_ps(b_packed) : _mm512_load_ps(b_packed);
    const __m512 b1 = kStridedB ? _mm512_loadu_ps(b_packed + 16) : _mm512_load_ps(b_packed + 16);
    if constexpr (kCopyB) {
      _mm512_store_ps(b_copy, b0);
      _mm512_store_ps(b_copy + 16, b1);
      b_copy += kNR;
    }
#pragma GCC unroll 14
    for (size_t r = 0; r < kMR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * kRStep]);
      t.lo[r] = _mm512_fmadd_ps(av, b0, t.lo[r]);
      t.hi[r] = _mm512_fmadd_ps(av, b1, t.hi[r]);
    }
    a += kPStep;
    b_packed += kStridedB ? ldb : kNR;
  }
  t.store(c, ldc, mr, canonical_nans);
}

}  // namespace

void f32_gemm_ukernel_14x32__avx512f(size_t kc, const float* a_packed, const float* b_packed,
                                     float* c, size_t ldc, size_t mr, size_t nr, bool accumulate,
                                     bool canonical_nans, const PrefetchRows& prefetch) {
  // Only a call with rows to request carries their walk: its registers
  // cost the rest 1.04x the time (the weight grad at zmoe's size).
  if (prefetch.count == 0) {
    tile_14x32<kMR, 1>(kc, a_packed, b_packed, c, ldc, mr, nr, accumulate, canonical_nans,
                       CTilePrefetcher(c, ldc, mr, nr, kc));
  } else {
    tile_14x32<kMR, 1>(kc, a_packed, b_packed, c, ldc, mr, nr, accumulate, canonical_nans,
                       BothPrefetchers(CTilePrefetcher(c, ldc, mr, nr, kc), RowsPrefetcher(prefetch)));
  }
}

void f32_gemm_ukernel_14x32_rows_a__avx512f(size_t kc, const float* a_rows, const float* b_packed, float* c,
                                            size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                            const PrefetchRows& prefetch) {
  tile_14x32<1, kRowsALd>(kc, a_rows, b_packed, c, ldc, mr, nr, accumulate, canonical_nans, RowsPrefetcher(prefetch));
}

void f32_gemm_ukernel_14x32_rows_a_strided_b__avx512f(size_t kc, const float* a_rows, const void* b_rows, size_t ldb,
                                                      float* b_packed, float* c, size_t ldc, size_t mr,
                                                      bool accumulate, bool canonical_nans,
                                                      const PrefetchRows& prefetch) {
  const auto* b = static_cast<const float*>(b_rows);
  if (b_packed != nullptr) {
    tile_14x32<1, kRowsALd, RowsPrefetcher, true, true>(kc, a_rows, b, c, ldc, mr, kNR, accumulate, canonical_nans,
                                                        RowsPrefetcher(prefetch), ldb, b_packed);
  } else {
    tile_14x32<1, kRowsALd, RowsPrefetcher, true>(kc, a_rows, b, c, ldc, mr, kNR, accumulate, canonical_nans,
                                                  RowsPrefetcher(prefetch), ldb);
  }
}

}  // namespace moegrad::kernels::avx512
