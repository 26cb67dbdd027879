// common/canonical_nan.h's rule, 16 lanes at a time: every NaN lane becomes
// the canonical NaN. Internal linkage, like CTile (c_tile__avx512f.h).
#pragma once

#include "common/canonical_nan.h"
#include "kernels/avx512/intrinsics__avx512f.h"

namespace moegrad::kernels::avx512 {
namespace {

__attribute__((always_inline)) inline __m512 canonical_nan(__m512 v) {
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(nan, v, _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(kCanonicalNanBits))));
}

}  // namespace
}  // namespace moegrad::kernels::avx512
