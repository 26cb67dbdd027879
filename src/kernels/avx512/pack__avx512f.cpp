// Packing for the 14x32 AVX-512 micro-kernel, widening to f32 on the way.
// Contiguous reductions (the common case: row-major grad_y, weight [G, K, N])
// go through 16x16 register transposes; a weight whose K is contiguous (a
// [G, N, K] buffer viewed transposed) is a straight copy; anything else takes
// the strided element loop. All give the same values, hence the same bits.

#include <cstdint>

#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"
#include "kernels/avx512/widen__avx512f.h"

namespace moegrad::kernels::avx512 {
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
      const __m512 v = load_partial_widened<T>(src, at, mr);  // mr <= kMR < 16
      _mm512_mask_storeu_ps(a_packed + p * kMR, static_cast<__mmask16>((1u << kMR) - 1u), v);
    }
    return;
  }
  if (col_stride != 1) return pack_a_strided<T>(src, row_stride, col_stride, rows, mr, n0, kc, a_packed);
  int64_t offsets[16];
  for (size_t r = 0; r < mr; ++r) offsets[r] = static_cast<int64_t>(rows[r]) * row_stride;
  transpose_rows<T>(src, offsets, mr, n0, kc, a_packed, kMR, static_cast<__mmask16>((1u << kMR) - 1u));
}

// B[p][c] = b[k0 + c, n0 + p]
template <DType T>
void pack_b(const void* src, int64_t k_stride, int64_t n_stride, size_t k0, size_t nr, size_t n0, size_t kc,
            float* b_packed) {
  if (n_stride == 1) {
    for (size_t half = 0; half < kNR; half += 16) {
      const size_t count = nr > half ? (nr - half < 16 ? nr - half : 16) : 0;
      int64_t offsets[16];
      for (size_t c = 0; c < count; ++c) offsets[c] = static_cast<int64_t>(k0 + half + c) * k_stride;
      transpose_rows<T>(src, offsets, count, n0, kc, b_packed + half, kNR, 0xffff);
    }
    return;
  }
  if (k_stride == 1) {
    for (size_t p = 0; p < kc; ++p) {
      const int64_t row = static_cast<int64_t>(n0 + p) * n_stride + static_cast<int64_t>(k0);
      for (size_t half = 0; half < kNR; half += 16) {
        const size_t count = nr > half ? (nr - half < 16 ? nr - half : 16) : 0;
        const __m512 v = count == 16  ? load16_widened<T>(src, row + static_cast<int64_t>(half))
                         : count == 0 ? _mm512_setzero_ps()
                                      : load_partial_widened<T>(src, row + static_cast<int64_t>(half), count);
        _mm512_store_ps(b_packed + p * kNR + half, v);
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

const PackGatheredRowsFn pack_a_rows_14__avx512f[kNumDTypes] = {
    pack_a_rows<DType::kF32>, pack_a_rows<DType::kF16>, pack_a_rows<DType::kBF16>};
const PackAFn pack_a_14__avx512f[kNumDTypes] = {pack_a<DType::kF32>, pack_a<DType::kF16>, pack_a<DType::kBF16>};
const PackBFn pack_b_32__avx512f[kNumDTypes] = {pack_b<DType::kF32>, pack_b<DType::kF16>, pack_b<DType::kBF16>};

}  // namespace moegrad::kernels::avx512
