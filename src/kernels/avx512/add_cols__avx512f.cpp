// The row-vector engine's scatter-add: its tile holds grad_x columns as rows
// (Ct[j][r]), so 16 rows x 16 columns at a time are transposed in registers
// and each grad_y row's 16 values are added into its token's grad_x row.

#include "kernels/avx512/c_tile__avx512f.h"
#include "kernels/avx512/canonical_nan__avx512f.h"
#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"
#include "kernels/avx512/widen__avx512f.h"

namespace moegrad::kernels::avx512 {

// For r ascending: dst[tokens[r]*dst_stride + j] += ct[j*ldct + r], j < cols
// (= 0 + ct where starts[r], a token's first add; = ct when !add). A sum
// stores every NaN as the canonical one (common/canonical_nan.h).
// Columns blocks are independent and, within one, rows are added one after
// the other (a token twice in the tile gets its two adds in row order), so
// every element sees the same adds in the same order as row-by-row adding.
void f32_add_cols__avx512f(const float* ct, size_t ldct, size_t rows, size_t cols, float* dst, int64_t dst_stride,
                           const int32_t* tokens, bool add, const uint8_t* starts) {
  __m512 v[16];
  for (size_t r0 = 0; r0 < rows; r0 += 16) {
    const size_t nr = rows - r0 < 16 ? rows - r0 : 16;
    const __mmask16 row_mask = lane_mask(nr);
    for (size_t j0 = 0; j0 < cols; j0 += 16) {
      const size_t nj = cols - j0 < 16 ? cols - j0 : 16;
      const __mmask16 col_mask = lane_mask(nj);
#pragma GCC unroll 16
      for (size_t j = 0; j < 16; ++j)
        v[j] = j < nj ? _mm512_maskz_loadu_ps(row_mask, ct + (j0 + j) * ldct + r0) : _mm512_setzero_ps();
      transpose16x16(v);
      // Unrolled with a guard, so v stays in registers (left to itself,
      // GCC kept v on the stack once the NaN blend was added: zmoe took
      // 1.05x the time with one thread).
#pragma GCC unroll 16
      for (size_t r = 0; r < 16; ++r) {
        if (r >= nr) break;
        float* d = dst + static_cast<int64_t>(tokens[r0 + r]) * dst_stride + static_cast<int64_t>(j0);
        __m512 out = v[r];
        if (add) {
          const bool start = starts != nullptr && starts[r0 + r] != 0;
          out = canonical_nan(_mm512_add_ps(start ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(col_mask, d), out));
        }
        _mm512_mask_storeu_ps(d, col_mask, out);
      }
    }
  }
}

}  // namespace moegrad::kernels::avx512
