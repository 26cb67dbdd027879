#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"
#include "kernels/avx512/prefetch__avx512f.h"

namespace moegrad::kernels::avx512 {
namespace {

// Vectors along the strip's weight rows: lane l of a vector holds weight row
// kLaneRow[l] (rows 14 and 15 do not exist: zero, never stored). The order
// is the one the 8x8 transposes below produce without a last lane shuffle.
constexpr size_t kLaneRow[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

// Eight consecutive floats of rows c and c + 8 (c < 8) of a [16][ld] matrix,
// as the low and high halves of one vector; rows >= `rows` read as zero.
// (Two masked loads instead of the insert measured no faster in
// kernel_bench, 8 rows slower.)
__attribute__((always_inline)) inline __m512 row_pair(const float* m, size_t ld, size_t c, size_t rows) {
  const __m256 lo = c < rows ? _mm256_loadu_ps(m + c * ld) : _mm256_setzero_ps();
  const __m256 hi = c + 8 < rows ? _mm256_loadu_ps(m + (c + 8) * ld) : _mm256_setzero_ps();
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}

// x[c] = [row c | row c + 8] (8 floats each) in, out[j] = column j of the
// 16 rows in kLaneRow order: the two 8x8 halves are transposed together
// (unpack, then 64-bit shuffles, within 128-bit lanes), then one 128-bit
// lane shuffle per column gathers the four row quartets.
__attribute__((always_inline)) inline void transpose_16x8(const __m512 x[8], __m512 out[8]) {
  __m512 t[8], s[8];
#pragma GCC unroll 4
  for (size_t i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (size_t h = 0; h < 2; ++h) {  // rows 0-3 (h 0) and 4-7 (h 1) of each half
    const __m512 *lo = t + 4 * h, *hi = t + 4 * h + 2;
    s[4 * h + 0] = _mm512_shuffle_ps(lo[0], hi[0], 0x44);  // columns 0 | 4
    s[4 * h + 1] = _mm512_shuffle_ps(lo[0], hi[0], 0xee);  // columns 1 | 5
    s[4 * h + 2] = _mm512_shuffle_ps(lo[1], hi[1], 0x44);  // columns 2 | 6
    s[4 * h + 3] = _mm512_shuffle_ps(lo[1], hi[1], 0xee);  // columns 3 | 7
  }
  // s[j] (j < 4) holds, per 128-bit lane: column j of rows 0-3, column j + 4
  // of rows 0-3, column j of rows 8-11, column j + 4 of rows 8-11; s[j + 4]
  // the same for rows 4-7 and 12-15.
#pragma GCC unroll 4
  for (size_t j = 0; j < 4; ++j) {
    out[j] = _mm512_shuffle_f32x4(s[j], s[j + 4], 0x88);      // lanes 0, 2 of each
    out[j + 4] = _mm512_shuffle_f32x4(s[j], s[j + 4], 0xdd);  // lanes 1, 3 of each
  }
}

// R grad_y rows (1..12) x the strip's 14 weight rows, one accumulator per
// grad_y row: acc[r] lane l = Ct[kLaneRow[l]][r]. Per step p, acc[r] =
// fma(A[p][r], W[.][p], acc[r]): each element the same chain as the other
// tiles (kernels/gemm_kernels.h), so the same bits. The strip is read 8
// steps at a time and transposed in registers; the Ct tile is transposed on
// the way in and out the same way, in groups of 8 grad_y rows.
template <size_t R>
__attribute__((always_inline)) inline void narrow_tile(size_t kc, const float* w, const float* a, float* ct,
                                                       size_t ldct, size_t cols, bool accumulate,
                                                       const NextStrip& next) {
  constexpr size_t kGroups = (R + 7) / 8;
  __m512 acc[8 * kGroups];
  if (accumulate) {
#pragma GCC unroll 2
    for (size_t g = 0; g < kGroups; ++g) {
      __m512 x[8];
#pragma GCC unroll 8
      for (size_t c = 0; c < 8; ++c) x[c] = row_pair(ct + 8 * g, ldct, c, cols);
      transpose_16x8(x, acc + 8 * g);
    }
  } else {
#pragma GCC unroll 16
    for (size_t r = 0; r < 8 * kGroups; ++r) acc[r] = _mm512_setzero_ps();
  }
  StripStager stager(next, kc);
  TileReloader reload(ct, ldct, cols, 8 * kGroups, kc);
  for (size_t p0 = 0; p0 < kc; p0 += 8) {
    // Reads up to 7 floats past kc in each strip row (within kStripLd); the
    // columns they give are never used.
    __m512 x[8], wp[8];
#pragma GCC unroll 8
    for (size_t c = 0; c < 8; ++c) x[c] = row_pair(w + p0, kStripLd, c, kStrip);
    transpose_16x8(x, wp);
    const size_t steps = kc - p0 < 8 ? kc - p0 : 8;
#pragma GCC unroll 8
    for (size_t j = 0; j < 8; ++j) {
      if (j == steps) break;
      stager.step();
      reload.step(p0 + j);
      const float* ap = a + (p0 + j) * kPanel;
#pragma GCC unroll 12
      for (size_t r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(ap[r]), wp[j], acc[r]);
    }
  }
  stager.finish();
  // Back to rows: the same transpose gives, in out[i], Ct row kLaneRow[i]'s
  // first 4 grad_y rows of the group, row kLaneRow[i + 4]'s ... in 128-bit
  // lanes [row a 0-3 | row b 0-3 | row a 4-7 | row b 4-7]; one lane shuffle
  // makes that [row a | row b].
#pragma GCC unroll 2
  for (size_t g = 0; g < kGroups; ++g) {
    __m512 out[8];
    transpose_16x8(acc + 8 * g, out);
#pragma GCC unroll 8
    for (size_t i = 0; i < 8; ++i) {
      const __m512 v = _mm512_shuffle_f32x4(out[i], out[i], 0xd8);  // lanes 0, 2, 1, 3
      const size_t ra = kLaneRow[i], rb = kLaneRow[i + 8];
      float* at = ct + 8 * g;
      if (ra < cols) _mm256_storeu_ps(at + ra * ldct, _mm512_castps512_ps256(v));
      if (rb < cols) _mm256_storeu_ps(at + rb * ldct, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    }
  }
}

}  // namespace

void f32_rowvec_narrow_ukernel_14x12__avx512f(size_t kc, const float* w_strip, const float* a_panel, float* ct,
                                              size_t ldct, size_t rows, size_t cols, bool accumulate,
                                              const NextStrip& next) {
  static_assert(kNarrowRows == 12, "a case below for every row count up to kNarrowRows");
  switch (rows) {
    case 1: return narrow_tile<1>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 2: return narrow_tile<2>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 3: return narrow_tile<3>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 4: return narrow_tile<4>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 5: return narrow_tile<5>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 6: return narrow_tile<6>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 7: return narrow_tile<7>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 8: return narrow_tile<8>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 9: return narrow_tile<9>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 10: return narrow_tile<10>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 11: return narrow_tile<11>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    case 12: return narrow_tile<12>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
    // A call outside the table's narrow_rows would leave columns of Ct
    // stale and the result wrong without a word: stop instead.
    default: __builtin_trap();
  }
}

}  // namespace moegrad::kernels::avx512
