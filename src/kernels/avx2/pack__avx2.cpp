// Packing for the 6x16 AVX2 micro-kernel, widening to f32 on the way; the
// same three cases as the AVX-512 packing (transpose, copy, strided), with
// 8x8 transposes.
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx2/kernels__avx2.h"
#include "kernels/avx2/masked__avx2.h"
#include "kernels/avx2/widen__avx2.h"

namespace moegrad::kernels::avx2 {
namespace {

inline float widen_f16(uint16_t h) { return _cvtsh_ss(h); }

#include "kernels/pack_strided.inc"

// A[p][r] = a[rows[r], n0 + p]
template <DType T>
void pack_a(const void* src, int64_t row_stride, int64_t col_stride, const int32_t* rows, size_t mr, size_t n0,
            size_t kc, float* a_packed) {
  if (row_stride == 1 && mr > 0 && rows[mr - 1] - rows[0] == static_cast<int32_t>(mr) - 1) {
    // Consecutive rows of a matrix contiguous along them (the weight grad's
    // x seen as [K, M]): each p is one contiguous run of mr elements.
    for (size_t p = 0; p < kc; ++p) {
      const int64_t at = static_cast<int64_t>(rows[0]) + static_cast<int64_t>(n0 + p) * col_stride;
      store_first(a_packed + p * kMR, kMR, load_partial_widened<T>(src, at, mr));
    }
    return;
  }
  if (col_stride != 1) return pack_a_strided<T>(src, row_stride, col_stride, rows, mr, n0, kc, a_packed);
  int64_t offsets[8];
  for (size_t r = 0; r < mr; ++r) offsets[r] = static_cast<int64_t>(rows[r]) * row_stride;
  __m256 v[8];
  for (size_t p = 0; p < kc; p += 8) {
    const size_t q = kc - p < 8 ? kc - p : 8;
    load_rows<T>(src, offsets, mr, static_cast<int64_t>(n0 + p), q, v);
    transpose8x8(v);
    for (size_t j = 0; j < q; ++j) store_first(a_packed + (p + j) * kMR, kMR, v[j]);
  }
}

// B[p][c] = b[k0 + c, n0 + p]
template <DType T>
void pack_b(const void* src, int64_t k_stride, int64_t n_stride, size_t k0, size_t nr, size_t n0, size_t kc,
            float* b_packed) {
  if (n_stride == 1) {
    for (size_t half = 0; half < kNR; half += 8) {
      const size_t count = nr > half ? (nr - half < 8 ? nr - half : 8) : 0;
      int64_t offsets[8];
      for (size_t c = 0; c < count; ++c) offsets[c] = static_cast<int64_t>(k0 + half + c) * k_stride;
      __m256 v[8];
      for (size_t p = 0; p < kc; p += 8) {
        const size_t q = kc - p < 8 ? kc - p : 8;
        load_rows<T>(src, offsets, count, static_cast<int64_t>(n0 + p), q, v);
        transpose8x8(v);
        for (size_t j = 0; j < q; ++j) _mm256_store_ps(b_packed + (p + j) * kNR + half, v[j]);
      }
    }
    return;
  }
  if (k_stride == 1) {
    for (size_t p = 0; p < kc; ++p) {
      const int64_t row = static_cast<int64_t>(n0 + p) * n_stride + static_cast<int64_t>(k0);
      for (size_t half = 0; half < kNR; half += 8) {
        const size_t count = nr > half ? (nr - half < 8 ? nr - half : 8) : 0;
        const __m256 v = count == 8  ? load8_widened<T>(src, row + static_cast<int64_t>(half))
                         : count == 0 ? _mm256_setzero_ps()
                                      : load_partial_widened<T>(src, row + static_cast<int64_t>(half), count);
        _mm256_store_ps(b_packed + p * kNR + half, v);
      }
    }
    return;
  }
  pack_b_strided<T>(src, k_stride, n_stride, k0, nr, n0, kc, b_packed);
}

// A[r][p] = a[rows[r], n0 + p], rows >= mr zero: gathered rows copied.
template <DType T>
void pack_a_rows(const void* src, int64_t row_stride, const int32_t* rows, size_t mr, size_t n0, size_t kc,
                 float* a_rows) {
  int64_t offsets[kMR];
  for (size_t r = 0; r < mr; ++r) offsets[r] = static_cast<int64_t>(rows[r]) * row_stride;
  copy_rows<T>(src, offsets, mr, kMR, n0, kc, a_rows, kRowsALd);
}

}  // namespace

const PackAFn pack_a_6__avx2[kNumDTypes] = {pack_a<DType::kF32>, pack_a<DType::kF16>, pack_a<DType::kBF16>};
const PackBFn pack_b_16__avx2[kNumDTypes] = {pack_b<DType::kF32>, pack_b<DType::kF16>, pack_b<DType::kBF16>};
const PackGatheredRowsFn pack_a_rows_6__avx2[kNumDTypes] = {pack_a_rows<DType::kF32>, pack_a_rows<DType::kF16>,
                                                            pack_a_rows<DType::kBF16>};

}  // namespace moegrad::kernels::avx2
