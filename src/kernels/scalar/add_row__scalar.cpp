// The packed engine's scatter-add steps, a grad_x row span at a time
// (kernels/gemm_kernels.h: AddRowFn). Every stored NaN is the canonical one
// (common/canonical_nan.h): these stores are the sums' last.
#include "common/canonical_nan.h"
#include "kernels/scalar/kernels__scalar.h"

namespace moegrad::kernels::scalar {

void f32_add_row__scalar(float* dst, const float* src, size_t n) {
  for (size_t j = 0; j < n; ++j) dst[j] = canonical_nan(dst[j] + src[j]);
}

void f32_start_row__scalar(float* dst, const float* src, size_t n) {
  for (size_t j = 0; j < n; ++j) dst[j] = canonical_nan(0.0f + src[j]);
}

}  // namespace moegrad::kernels::scalar
