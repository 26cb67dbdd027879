#include <cmath>

#include "common/canonical_nan.h"
#include "kernels/scalar/kernels__scalar.h"

namespace moegrad::kernels::scalar {

// C[r, c] = fma(A[p][r], B[p][c], C[r, c]) for p = 0..kc-1, one chain per element.
void f32_gemm_ukernel_4x8__scalar(size_t kc, const float* a_packed, const float* b_packed, float* c,
                                  size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                  const PrefetchRows&) {
  float acc[kMR][kNR] = {};
  if (accumulate) {
    for (size_t r = 0; r < mr; ++r)
      for (size_t j = 0; j < nr; ++j) acc[r][j] = c[r * ldc + j];
  }
  for (size_t p = 0; p < kc; ++p) {
    const float* a = a_packed + p * kMR;
    const float* b = b_packed + p * kNR;
    for (size_t r = 0; r < kMR; ++r)
      for (size_t j = 0; j < kNR; ++j) acc[r][j] = std::fma(a[r], b[j], acc[r][j]);
  }
  for (size_t r = 0; r < mr; ++r)
    for (size_t j = 0; j < nr; ++j) c[r * ldc + j] = canonical_nans ? canonical_nan(acc[r][j]) : acc[r][j];
}

}  // namespace moegrad::kernels::scalar
