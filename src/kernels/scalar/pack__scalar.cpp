#include <cstdint>
#include <cstring>

#include "kernels/scalar/kernels__scalar.h"

namespace moegrad::kernels::scalar {
namespace {

template <DType T>
float load_widened(const void* base, int64_t offset) {
  if constexpr (T == DType::kF32) {
    return static_cast<const float*>(base)[offset];
  } else {
    const uint16_t h = static_cast<const uint16_t*>(base)[offset];
    return T == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
}

// A[p][r] = grad_y[rows[r], n0 + p]
template <DType T>
void pack_a(const void* src, int64_t row_stride, int64_t col_stride, const int32_t* rows, size_t mr,
            size_t n0, size_t kc, float* a_packed) {
  for (size_t r = 0; r < kMR; ++r) {
    if (r >= mr) {
      for (size_t p = 0; p < kc; ++p) a_packed[p * kMR + r] = 0.0f;
      continue;
    }
    const int64_t row = static_cast<int64_t>(rows[r]) * row_stride;
    for (size_t p = 0; p < kc; ++p)
      a_packed[p * kMR + r] = load_widened<T>(src, row + static_cast<int64_t>(n0 + p) * col_stride);
  }
}

// B[p][c] = weight_g[k0 + c, n0 + p]
template <DType T>
void pack_b(const void* src, int64_t k_stride, int64_t n_stride, size_t k0, size_t nr, size_t n0,
            size_t kc, float* b_packed) {
  for (size_t c = 0; c < kNR; ++c) {
    if (c >= nr) {
      for (size_t p = 0; p < kc; ++p) b_packed[p * kNR + c] = 0.0f;
      continue;
    }
    const int64_t col = static_cast<int64_t>(k0 + c) * k_stride;
    for (size_t p = 0; p < kc; ++p)
      b_packed[p * kNR + c] = load_widened<T>(src, col + static_cast<int64_t>(n0 + p) * n_stride);
  }
}

}  // namespace

const PackAFn pack_a_4__scalar[kNumDTypes] = {pack_a<DType::kF32>, pack_a<DType::kF16>,
                                              pack_a<DType::kBF16>};
const PackBFn pack_b_8__scalar[kNumDTypes] = {pack_b<DType::kF32>, pack_b<DType::kF16>,
                                              pack_b<DType::kBF16>};

}  // namespace moegrad::kernels::scalar
