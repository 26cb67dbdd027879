// The fast bf16 mode on the row-vector engine: Ct[c][r] accumulates, pair by
// pair, vdpbf16ps(grad_y pair of row r, weight pair of row c). The products
// of a pair are the same whichever operand is broadcast, and the instruction
// fixes their order (element 2m+1, then 2m), so this gives the packed pair
// kernel's bits (checked against the scalar emulation by the tests) while
// copying weight rows instead of transposing them.

#include <cstdint>

#include "kernels/avx512/ct_tile__avx512f.h"
#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/avx512/prefetch__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"
#include "kernels/avx512/widen__avx512f.h"
#include "kernels/avx512bf16/pairs__avx512bf16.h"

namespace moegrad::kernels::avx512bf16 {
namespace {

using avx512::kPanel;
using avx512::kStrip;
using avx512::kStripLd;  // in 32-bit pair words here

// V zmm vectors of 16 grad_y rows, plus (Half) one ymm vector of 8 more, x
// 14 weight rows: 14*(V + Half) accumulators; one pair per step, the weight
// pair broadcast from the strip. A lane's chain is the same at either width
// (the f32 kernel's reason for the ymm vector holds here too).
template <size_t V, bool Half>
__attribute__((always_inline)) inline void pair_tile(size_t kc, const float* w_strip, const float* a_panel, float* ct,
                                                     size_t ldct, size_t cols, bool accumulate,
                                                     const NextStrip& next) {
  const auto* w = reinterpret_cast<const int32_t*>(w_strip);
  avx512::CtTile<kStrip, V, Half> t(ct, ldct, cols, accumulate);
  avx512::StripStager stager(next, (kc + 1) / 2);
  for (size_t m = 0; m < (kc + 1) / 2; ++m) {
    stager.step();
    __m512bh av[t.kZ];
#pragma GCC unroll 2
    for (size_t v = 0; v < V; ++v) av[v] = (__m512bh)_mm512_load_si512(a_panel + m * kPanel + 16 * v);
    __m256bh ay{};
    if constexpr (Half) ay = (__m256bh)_mm256_load_si256(reinterpret_cast<const __m256i*>(a_panel + m * kPanel + 16 * V));
#pragma GCC unroll 14
    for (size_t c = 0; c < kStrip; ++c) {
      // One broadcast; the ymm vector uses its low half.
      const __m512i pair = _mm512_set1_epi32(w[c * kStripLd + m]);
#pragma GCC unroll 2
      for (size_t v = 0; v < V; ++v) t.z[c][v] = _mm512_dpbf16_ps(t.z[c][v], av[v], (__m512bh)pair);
      if constexpr (Half) t.y[c] = _mm256_dpbf16_ps(t.y[c], ay, (__m256bh)_mm512_castsi512_si256(pair));
    }
  }
  stager.finish();
  t.store(ct, ldct, cols);
}

void bf16_rowvec_ukernel_14x32__avx512bf16(size_t kc, const float* w_strip, const float* a_panel, float* ct,
                                           size_t ldct, size_t rows, size_t cols, bool accumulate,
                                           const NextStrip& next) {
  // As in the f32 kernel: a slot's last panel runs only the 8-row vectors
  // its rows need.
  avx512::for_tail_rows(rows, [&]<size_t V, bool Half>() {
    pair_tile<V, Half>(kc, w_strip, a_panel, ct, ldct, cols, accumulate, next);
  });
}

// A[m][r] = pair (grad_y[rows[r], n0+2m], grad_y[rows[r], n0+2m+1]), rows >=
// count zero: 16x16 transposes of pair words.
void pack_panel_pairs(const void* src, int64_t row_stride, const int32_t* rows, size_t count, size_t n0, size_t kc,
                      float* a_panel) {
  const auto* base = static_cast<const uint16_t*>(src);
  const size_t pairs = (kc + 1) / 2;
  __m512 v[16];
  for (size_t half = 0; half < kPanel; half += 16) {
    const size_t n = count > half ? (count - half < 16 ? count - half : 16) : 0;
    for (size_t m = 0; m < pairs; m += 16) {
#pragma GCC unroll 16
      for (size_t r = 0; r < 16; ++r)
        v[r] = r < n ? load_pairs(base + static_cast<int64_t>(rows[half + r]) * row_stride + n0, 2 * m, kc)
                     : _mm512_setzero_ps();
      avx512::transpose16x16(v);
      const size_t q = pairs - m < 16 ? pairs - m : 16;
      for (size_t j = 0; j < q; ++j) _mm512_store_ps(a_panel + (m + j) * kPanel + half, v[j]);
    }
  }
}

// W[c][m] = pair (weight_g[k0+c, n0+2m], weight_g[k0+c, n0+2m+1]), rows >=
// count zero: the row's bf16 bytes as they are.
void copy_strip_pairs(const void* src, int64_t k_stride, size_t k0, size_t count, size_t n0, size_t kc,
                      float* w_strip) {
  int64_t offsets[kStrip];
  for (size_t c = 0; c < count; ++c) offsets[c] = static_cast<int64_t>(k0 + c) * k_stride;
  copy_pair_rows(static_cast<const uint16_t*>(src), offsets, count, kStrip, n0, kc, w_strip, kStripLd);
}

// Only bf16 runs in pairs.
constexpr PackGatheredRowsFn kPackPanelPairs[kNumDTypes] = {nullptr, nullptr, pack_panel_pairs};
constexpr RowvecCopyStripFn kCopyStripPairs[kNumDTypes] = {nullptr, nullptr, copy_strip_pairs};

}  // namespace

constinit const RowvecKernels kPairRowvecKernels = {
    kStrip,
    kPanel,
    2 * avx512::kMaxStripKc,  // a strip row's words hold twice as many bf16 elements
    2,
    kStripLd,
    kStrip * kStripLd,
    bf16_rowvec_ukernel_14x32__avx512bf16,
    kPackPanelPairs,
    kCopyStripPairs,
    {false, false, true},
    avx512::f32_add_cols__avx512f,
    nullptr,
    0,
};

}  // namespace moegrad::kernels::avx512bf16
