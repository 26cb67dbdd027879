// The AVX2 row-vector engine's scatter-add: its tile holds grad_x columns as
// rows (Ct[j][r]), so 8 rows x 8 columns at a time are transposed in
// registers and each grad_y row's 8 values are added into its token's
// grad_x row.
#include <immintrin.h>

#include "kernels/avx2/canonical_nan__avx2.h"
#include "kernels/avx2/kernels__avx2.h"
#include "kernels/avx2/masked__avx2.h"
#include "kernels/avx2/widen__avx2.h"

namespace moegrad::kernels::avx2 {

// For r ascending: dst[tokens[r]*dst_stride + j] += ct[j*ldct + r], j < cols
// (= 0 + ct where starts[r], a token's first add; = ct when !add; a sum
// stores every NaN as the canonical one, common/canonical_nan.h). Column
// blocks are independent and, within one, rows are added one after the
// other (a token twice in the tile gets its two adds in row order): every
// element sees the same adds in the same order as row-by-row adding.
void f32_add_cols__avx2(const float* ct, size_t ldct, size_t rows, size_t cols, float* dst, int64_t dst_stride,
                        const int32_t* tokens, bool add, const uint8_t* starts) {
  __m256 v[8];
  for (size_t r0 = 0; r0 < rows; r0 += 8) {
    const size_t nr = rows - r0 < 8 ? rows - r0 : 8;
    for (size_t j0 = 0; j0 < cols; j0 += 8) {
      const size_t nj = cols - j0 < 8 ? cols - j0 : 8;
#pragma GCC unroll 8
      for (size_t j = 0; j < 8; ++j)
        v[j] = j < nj ? load_first(ct + (j0 + j) * ldct + r0, nr) : _mm256_setzero_ps();
      transpose8x8(v);
      for (size_t r = 0; r < nr; ++r) {
        float* d = dst + static_cast<int64_t>(tokens[r0 + r]) * dst_stride + static_cast<int64_t>(j0);
        if (add) {
          const bool start = starts != nullptr && starts[r0 + r] != 0;
          const __m256 sum = start ? _mm256_setzero_ps() : load_first(d, nj);
          v[r] = canonical_nan(_mm256_add_ps(sum, v[r]));
        }
        store_first(d, nj, v[r]);
      }
    }
  }
}

}  // namespace moegrad::kernels::avx2
