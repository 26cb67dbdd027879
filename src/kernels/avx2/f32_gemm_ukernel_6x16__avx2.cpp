#include <immintrin.h>

#include "kernels/avx2/canonical_nan__avx2.h"
#include "kernels/avx2/kernels__avx2.h"
#include "kernels/avx2/masked__avx2.h"
#include "kernels/avx2/prefetch__avx2.h"
#include "kernels/avx2/widen__avx2.h"

namespace moegrad::kernels::avx2 {

namespace {

// Step p's 16 columns of B, packed ([kc][NR], 32-byte aligned).
struct PackedB {
  const float* b;
  void load(size_t p, __m256& b0, __m256& b1) const {
    b0 = _mm256_load_ps(b + p * kNR);
    b1 = _mm256_load_ps(b + p * kNR + 8);
  }
};

// The same read in place: row p of B, ldb elements of T after row p - 1,
// widened to f32 (exact: F16C for f16, a shift for bf16), each address
// computed from p.
template <DType T>
struct InPlaceB {
  const void* b;
  size_t ldb;
  void load(size_t p, __m256& b0, __m256& b1) const {
    const auto row = static_cast<int64_t>(p * ldb);
    b0 = load8_widened<T>(b, row);
    b1 = load8_widened<T>(b, row + 8);
  }
};

// 12 accumulators (6 rows x 2 vectors of 8 columns), 2 B vectors, 1
// broadcast. A[p][r] sits at a[p * kPStep + r * kRStep]: transposed ([kc][6])
// or copied rows ([6][ld], a compile-time ld). b_copy, where kCopyB: B
// stored packed as it is read. Only rows < kRows are computed
// (with_tile_rows).
// C[r, c] = fma(A[p][r], B[p][c], C[r, c]) for p = 0..kc-1.
template <size_t kPStep, size_t kRStep, class BSource, class Prefetcher, bool kCopyB = false, size_t kRows = kMR>
__attribute__((always_inline)) inline void tile_6x16(size_t kc, const float* a, BSource b, float* c, size_t ldc,
                                                     size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                                     Prefetcher next, float* b_copy = nullptr) {
  const size_t n0 = nr < 8 ? nr : 8, n1 = nr > 8 ? nr - 8 : 0;  // columns of each vector
  __m256 acc0[kRows], acc1[kRows];
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    acc0[r] = _mm256_setzero_ps();
    acc1[r] = _mm256_setzero_ps();
  }
  // Unrolled with a guard so the accumulators never leave registers.
  if (accumulate) {
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) {
      if (r >= mr) break;
      acc0[r] = load_first(c + r * ldc, n0);
      acc1[r] = load_first(c + r * ldc + 8, n1);
    }
  }
  for (size_t p = 0; p < kc; ++p) {
    next.step();
    __m256 b0, b1;
    b.load(p, b0, b1);
    if constexpr (kCopyB) {
      _mm256_store_ps(b_copy + p * kNR, b0);
      _mm256_store_ps(b_copy + p * kNR + 8, b1);
    }
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * kRStep);
      acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
    }
    a += kPStep;
  }
  if (canonical_nans) {
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) {
      acc0[r] = canonical_nan(acc0[r]);
      acc1[r] = canonical_nan(acc1[r]);
    }
  }
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    if (r < mr) {
      store_first(c + r * ldc, n0, acc0[r]);
      store_first(c + r * ldc + 8, n1, acc1[r]);
    }
  }
}

// Calls run.template operator()<R>() with R the smallest of 2, 4 and 6 rows
// that holds mr: a call for a short micro-panel (an expert's last rows)
// computes only those (each row's chain reads only its own row of A, so
// the rows it computes keep their bits).
template <class Run>
__attribute__((always_inline)) inline void with_tile_rows(size_t mr, Run&& run) {
  if (mr > 4) {
    run.template operator()<kMR>();
  } else if (mr > 2) {
    run.template operator()<4>();
  } else {
    run.template operator()<2>();
  }
}

// B of dtype T read in place, stored packed where b_packed is not null
// (only from a panel's first call of several, a full micro-panel: its
// 6-row tile alone is compiled).
template <DType T>
void gemm_ukernel_6x16_rows_a_in_place_b(size_t kc, const float* a_rows, const void* b, size_t ldb, float* b_packed,
                                         float* c, size_t ldc, size_t mr, bool accumulate, bool canonical_nans,
                                         const PrefetchRows& prefetch) {
  const InPlaceB<T> src{b, ldb};
  if (b_packed != nullptr) {
    tile_6x16<1, kRowsALd, InPlaceB<T>, RowsPrefetcher, true>(kc, a_rows, src, c, ldc, mr, kNR, accumulate,
                                                               canonical_nans, RowsPrefetcher(prefetch), b_packed);
    return;
  }
  with_tile_rows(mr, [&]<size_t kRows>() __attribute__((always_inline)) {
    tile_6x16<1, kRowsALd, InPlaceB<T>, RowsPrefetcher, false, kRows>(kc, a_rows, src, c, ldc, mr, kNR, accumulate,
                                                                       canonical_nans, RowsPrefetcher(prefetch));
  });
}

}  // namespace

void f32_gemm_ukernel_6x16__avx2(size_t kc, const float* a_packed, const float* b_packed, float* c,
                                 size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                 const PrefetchRows& prefetch) {
  // Only a call with rows to request carries their walk (as on AVX-512).
  if (prefetch.count == 0) {
    tile_6x16<kMR, 1>(kc, a_packed, PackedB{b_packed}, c, ldc, mr, nr, accumulate, canonical_nans, NoPrefetch{});
  } else {
    tile_6x16<kMR, 1>(kc, a_packed, PackedB{b_packed}, c, ldc, mr, nr, accumulate, canonical_nans,
                      RowsPrefetcher(prefetch));
  }
}

void f32_gemm_ukernel_6x16_rows_a__avx2(size_t kc, const float* a_rows, const float* b_packed, float* c, size_t ldc,
                                        size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                        const PrefetchRows& prefetch) {
  with_tile_rows(mr, [&]<size_t kRows>() __attribute__((always_inline)) {
    tile_6x16<1, kRowsALd, PackedB, RowsPrefetcher, false, kRows>(kc, a_rows, PackedB{b_packed}, c, ldc, mr, nr,
                                                                  accumulate, canonical_nans,
                                                                  RowsPrefetcher(prefetch));
  });
}

// As on AVX-512 (docs/performance-history.md has the measurements: forward,
// fine-grained, 0.83x the time of the pack pass in f32, 0.81x in f16/bf16).
const InPlaceBUkernelFn gemm_ukernel_6x16_rows_a_in_place_b__avx2[kNumDTypes] = {
    gemm_ukernel_6x16_rows_a_in_place_b<DType::kF32>,
    gemm_ukernel_6x16_rows_a_in_place_b<DType::kF16>,
    gemm_ukernel_6x16_rows_a_in_place_b<DType::kBF16>,
};

}  // namespace moegrad::kernels::avx2
