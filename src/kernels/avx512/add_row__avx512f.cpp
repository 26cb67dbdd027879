// The packed engine's scatter-add steps, a grad_x row span at a time
// (kernels/gemm_kernels.h: AddRowFn). Every stored NaN is the canonical one
// (common/canonical_nan.h): these stores are the sums' last.

#include "kernels/avx512/c_tile__avx512f.h"
#include "kernels/avx512/canonical_nan__avx512f.h"
#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"

namespace moegrad::kernels::avx512 {

void f32_add_row__avx512f(float* dst, const float* src, size_t n) {
  size_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(dst + j, canonical_nan(_mm512_add_ps(_mm512_loadu_ps(dst + j), _mm512_loadu_ps(src + j))));
  if (j < n) {
    const __mmask16 m = lane_mask(n - j);
    _mm512_mask_storeu_ps(
        dst + j, m, canonical_nan(_mm512_add_ps(_mm512_maskz_loadu_ps(m, dst + j), _mm512_maskz_loadu_ps(m, src + j))));
  }
}

void f32_start_row__avx512f(float* dst, const float* src, size_t n) {
  const __m512 zero = _mm512_setzero_ps();
  size_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(dst + j, canonical_nan(_mm512_add_ps(zero, _mm512_loadu_ps(src + j))));
  if (j < n) {
    const __mmask16 m = lane_mask(n - j);
    _mm512_mask_storeu_ps(dst + j, m, canonical_nan(_mm512_add_ps(zero, _mm512_maskz_loadu_ps(m, src + j))));
  }
}

}  // namespace moegrad::kernels::avx512
