// common/canonical_nan.h's rule, 8 lanes at a time: every NaN lane becomes
// the canonical NaN. Internal linkage, so no other ISA's translation unit
// can end up calling this copy.
#pragma once

#include <immintrin.h>

#include "common/canonical_nan.h"

namespace moegrad::kernels::avx2 {
namespace {

__attribute__((always_inline)) inline __m256 canonical_nan(__m256 v) {
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(kCanonicalNanBits))), nan);
}

}  // namespace
}  // namespace moegrad::kernels::avx2
