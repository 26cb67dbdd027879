#include "kernels/avx512/c_tile__avx512f.h"
#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"
#include "kernels/avx512/prefetch__avx512f.h"
#include "kernels/avx512/widen__avx512f.h"

namespace moegrad::kernels::avx512 {

namespace {

// Step p's 32 columns of B, packed ([kc][NR], 64-byte aligned).
struct PackedB {
  const float* b;
  void load(size_t p, __m512& b0, __m512& b1) const {
    b0 = _mm512_load_ps(b + p * kNR);
    b1 = _mm512_load_ps(b + p * kNR + 16);
  }
};

// The same read in place: row p of B, ldb elements of T after row p - 1,
// widened to f32 (exact: F16C for f16, a shift for bf16). Each address is
// computed from p, so no pointer ever steps past the last row.
template <DType T>
struct InPlaceB {
  const void* b;
  size_t ldb;
  void load(size_t p, __m512& b0, __m512& b1) const {
    const auto row = static_cast<int64_t>(p * ldb);
    b0 = load16_widened<T>(b, row);
    b1 = load16_widened<T>(b, row + 16);
  }
};

// 28 accumulators (14 rows x 2 vectors of 16 columns), 2 B vectors, A
// broadcast from memory: 30 of 32 zmm registers. A[p][r] sits at
// a[p * kPStep + r * kRStep]: transposed ([kc][14]) or copied rows ([14][ld],
// a compile-time ld so every broadcast is base + constant). b_copy, where
// kCopyB: B stored packed as it is read. Only rows < kRows are computed
// (with_tile_rows).
// C[r, c] = fma(A[p][r], B[p][c], C[r, c]) for p = 0..kc-1.
template <size_t kPStep, size_t kRStep, class BSource, class Prefetcher, bool kCopyB = false, size_t kRows = kMR>
__attribute__((always_inline)) inline void tile_14x32(size_t kc, const float* a, BSource b, float* c, size_t ldc,
                                                      size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                                      Prefetcher next, float* b_copy = nullptr) {
  CTile<kRows> t(c, ldc, mr, nr, accumulate);
  for (size_t p = 0; p < kc; ++p) {
    next.step();
    __m512 b0, b1;
    b.load(p, b0, b1);
    if constexpr (kCopyB) {
      _mm512_store_ps(b_copy + p * kNR, b0);
      _mm512_store_ps(b_copy + p * kNR + 16, b1);
    }
#pragma GCC unroll 14
    for (size_t r = 0; r < kRows; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * kRStep]);
      t.lo[r] = _mm512_fmadd_ps(av, b0, t.lo[r]);
      t.hi[r] = _mm512_fmadd_ps(av, b1, t.hi[r]);
    }
    a += kPStep;
  }
  t.store(c, ldc, mr, canonical_nans);
}

// B of dtype T read in place, stored packed where b_packed is not null
// (the driver asks for that only from a panel's first call of several, a
// full micro-panel: its 14-row tile alone is compiled).
template <DType T>
void gemm_ukernel_14x32_rows_a_in_place_b(size_t kc, const float* a_rows, const void* b, size_t ldb, float* b_packed,
                                          float* c, size_t ldc, size_t mr, bool accumulate, bool canonical_nans,
                                          const PrefetchRows& prefetch) {
  const InPlaceB<T> src{b, ldb};
  if (b_packed != nullptr) {
    tile_14x32<1, kRowsALd, InPlaceB<T>, RowsPrefetcher, true>(kc, a_rows, src, c, ldc, mr, kNR, accumulate,
                                                                canonical_nans, RowsPrefetcher(prefetch), b_packed);
    return;
  }
  with_tile_rows(mr, [&]<size_t kRows>() __attribute__((always_inline)) {
    tile_14x32<1, kRowsALd, InPlaceB<T>, RowsPrefetcher, false, kRows>(kc, a_rows, src, c, ldc, mr, kNR, accumulate,
                                                                        canonical_nans, RowsPrefetcher(prefetch));
  });
}

}  // namespace

void f32_gemm_ukernel_14x32__avx512f(size_t kc, const float* a_packed, const float* b_packed,
                                     float* c, size_t ldc, size_t mr, size_t nr, bool accumulate,
                                     bool canonical_nans, const PrefetchRows& prefetch) {
  // Only a call with rows to request carries their walk: its registers
  // cost the rest 1.04x the time (the weight grad at zmoe's size).
  if (prefetch.count == 0) {
    tile_14x32<kMR, 1>(kc, a_packed, PackedB{b_packed}, c, ldc, mr, nr, accumulate, canonical_nans,
                       CTilePrefetcher(c, ldc, mr, nr, kc));
  } else {
    tile_14x32<kMR, 1>(kc, a_packed, PackedB{b_packed}, c, ldc, mr, nr, accumulate, canonical_nans,
                       BothPrefetchers(CTilePrefetcher(c, ldc, mr, nr, kc), RowsPrefetcher(prefetch)));
  }
}

void f32_gemm_ukernel_14x32_rows_a__avx512f(size_t kc, const float* a_rows, const float* b_packed, float* c,
                                            size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                            const PrefetchRows& prefetch) {
  with_tile_rows(mr, [&]<size_t kRows>() __attribute__((always_inline)) {
    tile_14x32<1, kRowsALd, PackedB, RowsPrefetcher, false, kRows>(kc, a_rows, PackedB{b_packed}, c, ldc, mr, nr,
                                                                   accumulate, canonical_nans,
                                                                   RowsPrefetcher(prefetch));
  });
}

// The in-place variants, by B's dtype: f16 and bf16 are widened as they are
// read, two widening loads per 28 FMAs, instead of by a pack pass that waits
// on DRAM (driver/packed_gemm.cpp has the measurements on AVX-512,
// docs/performance-history.md those on AVX2 too).
const InPlaceBUkernelFn gemm_ukernel_14x32_rows_a_in_place_b__avx512f[kNumDTypes] = {
    gemm_ukernel_14x32_rows_a_in_place_b<DType::kF32>,
    gemm_ukernel_14x32_rows_a_in_place_b<DType::kF16>,
    gemm_ukernel_14x32_rows_a_in_place_b<DType::kBF16>,
};

}  // namespace moegrad::kernels::avx512
