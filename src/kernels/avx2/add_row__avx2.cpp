// The packed engine's scatter-add steps, a grad_x row span at a time
// (kernels/gemm_kernels.h: AddRowFn). Every stored NaN is the canonical one
// (common/canonical_nan.h): these stores are the sums' last.
#include <immintrin.h>

#include "kernels/avx2/canonical_nan__avx2.h"
#include "kernels/avx2/kernels__avx2.h"
#include "kernels/avx2/masked__avx2.h"
#include "kernels/avx2/widen__avx2.h"

namespace moegrad::kernels::avx2 {

void f32_add_row__avx2(float* dst, const float* src, size_t n) {
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(dst + j, canonical_nan(_mm256_add_ps(_mm256_loadu_ps(dst + j), _mm256_loadu_ps(src + j))));
  if (j < n) {
    const __m256 sum = _mm256_add_ps(load_first(dst + j, n - j), load_first(src + j, n - j));
    store_first(dst + j, n - j, canonical_nan(sum));
  }
}

void f32_start_row__avx2(float* dst, const float* src, size_t n) {
  const __m256 zero = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, canonical_nan(_mm256_add_ps(zero, _mm256_loadu_ps(src + j))));
  if (j < n) store_first(dst + j, n - j, canonical_nan(_mm256_add_ps(zero, load_first(src + j, n - j))));
}

}  // namespace moegrad::kernels::avx2
