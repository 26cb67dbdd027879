// The fast bf16 mode on AVX512_BF16: vdpbf16ps adds two bf16 products per
// lane per instruction, twice the f32 FMA rate. Its order (pair element 2m+1,
// then 2m, denormals flushed) is defined by scalar/bf16_pairs__scalar.cpp,
// which the tests hold this kernel to bit for bit.

#include <cstdint>

#include "kernels/avx512/c_tile__avx512f.h"
#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/avx512/kernels__avx512f.h"
#include "kernels/avx512/prefetch__avx512f.h"
#include "kernels/avx512/widen__avx512f.h"
#include "kernels/avx512bf16/pairs__avx512bf16.h"
#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx512bf16 {
namespace {

constexpr size_t kMR = 14;
constexpr size_t kNR = 32;
// Pair words per copied A row: one per two reduction elements, so a row of
// the f32 engine's length holds any kc <= avx512::kMaxStripKc twice over.
using avx512::kRowsALd;

// pack_a_pairs_strided packs A element by element, where A is strided
// along the reduction and its rows are neither contiguous (those are
// copied, pack_a_pair_rows: every reduction block the plan makes fits a
// copied row, so packed_gemm_tile never transposes them) nor consecutive
// and contiguous along the outer dimension (interleaved, pack_a_pairs).
#include "kernels/pack_pairs_strided.inc"

// 16 pair words from two rows of an operand contiguous along its outer
// dimension: word c = (lo[c], hi[c]) for the lanes in `lanes` (16-bit
// elements; the others, and hi where it is null, zero).
inline __m512i interleave_rows(const uint16_t* lo, const uint16_t* hi, __mmask16 lanes) {
  const __m512i l = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, lo));
  if (hi == nullptr) return l;
  return _mm512_or_si512(l, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, hi)), 16));
}

inline __mmask16 first_lanes(size_t n) { return n >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << n) - 1); }

// B[m][c] = pair (b[k0+c, n0+2m], b[k0+c, n0+2m+1]): 16x16 transposes of
// pair words where B is contiguous along the reduction; where it is
// contiguous along its outer dimension instead (the forward's weight, the
// weight grad's grad_y), two reduction rows interleaved per pair row.
void pack_b_pairs(const void* src, int64_t k_stride, int64_t n_stride, size_t k0, size_t nr, size_t n0, size_t kc,
                  float* b_packed) {
  if (n_stride != 1 && k_stride == 1) {
    const auto* base = static_cast<const uint16_t*>(src) + k0;
    const __mmask16 lanes0 = first_lanes(nr), lanes1 = nr > 16 ? first_lanes(nr - 16) : __mmask16{0};
    for (size_t m = 0; m < (kc + 1) / 2; ++m) {
      const uint16_t* lo = base + static_cast<int64_t>(n0 + 2 * m) * n_stride;
      const uint16_t* hi = 2 * m + 1 < kc ? lo + n_stride : nullptr;
      _mm512_store_si512(b_packed + m * kNR, interleave_rows(lo, hi, lanes0));
      _mm512_store_si512(b_packed + m * kNR + 16,
                         interleave_rows(lo + 16, hi == nullptr ? nullptr : hi + 16, lanes1));
    }
    return;
  }
  if (n_stride != 1) {
    pack_b_pairs_strided(src, k_stride, n_stride, k0, nr, n0, kc, b_packed);
    return;
  }
  const auto* base = static_cast<const uint16_t*>(src);
  const size_t pairs = (kc + 1) / 2;
  __m512 v[16];
  for (size_t half = 0; half < kNR; half += 16) {
    for (size_t m = 0; m < pairs; m += 16) {
      #pragma GCC unroll 16
      for (size_t c = 0; c < 16; ++c)
        v[c] = half + c < nr ? load_pairs(base + static_cast<int64_t>(k0 + half + c) * k_stride + n0, 2 * m, kc)
                             : _mm512_setzero_ps();
      avx512::transpose16x16(v);
      const size_t q = pairs - m < 16 ? pairs - m : 16;
      for (size_t j = 0; j < q; ++j) _mm512_store_ps(b_packed + (m + j) * kNR + half, v[j]);
    }
  }
}

// Copied rows: A[r][m] = the same pair, row r kRowsALd pair words from the
// next (the raw bf16 row: no transpose), rows >= mr zero.
void pack_a_pair_rows(const void* src, int64_t row_stride, const int32_t* rows, size_t mr, size_t n0, size_t kc,
                      float* a_rows) {
  int64_t offsets[kMR];
  for (size_t r = 0; r < mr; ++r) offsets[r] = static_cast<int64_t>(rows[r]) * row_stride;
  copy_pair_rows(static_cast<const uint16_t*>(src), offsets, mr, kMR, n0, kc, a_rows, kRowsALd);
}

// Pair row m of a 32-column B panel from two rows of raw bf16 (elements
// 2m and 2m+1 of the reduction, 32 columns each; hi all zero past an odd
// kc's end), as pack_b_pairs stores it: words 0-15 (w0) and 16-31 (w1),
// word c = (lo[c], hi[c]). The 16-bit interleaves work within 128-bit
// lanes (lo_words: columns 0-3, 8-11, 16-19, 24-27; hi_words: 4-7, ...),
// so the lanes are put back in column order.
__attribute__((always_inline)) inline void interleave_pair_row(__m512i lo, __m512i hi, __m512i* w0, __m512i* w1) {
  const __m512i lo_words = _mm512_unpacklo_epi16(lo, hi), hi_words = _mm512_unpackhi_epi16(lo, hi);
  *w0 = _mm512_permutex2var_epi64(lo_words, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), hi_words);
  *w1 = _mm512_permutex2var_epi64(lo_words, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), hi_words);
}

// 28 accumulators; per pair: 2 B loads, 14 pair broadcasts, 28 vdpbf16ps.
// A's pair m of row r sits at a[m * kMStep + r * kRStep] (32-bit words):
// transposed ([pairs][14]) or copied rows ([14][kRowsALd]). B is packed,
// or (kInPlaceB) raw bf16 rows ldb elements apart, interleaved into pairs
// as they are read and (kCopyB) stored packed to b_copy for the panel's
// other calls. Only rows < kRows are computed (avx512::with_tile_rows).
template <size_t kMStep, size_t kRStep, class Prefetcher, bool kInPlaceB = false, bool kCopyB = false,
          size_t kRows = kMR>
__attribute__((always_inline)) inline void pair_tile_14x32(size_t kc, const float* a_words, const void* b,
                                                           float* c, size_t ldc, size_t mr, size_t nr,
                                                           bool accumulate, bool canonical_nans, Prefetcher next,
                                                           size_t ldb = 0, float* b_copy = nullptr) {
  avx512::CTile<kRows> t(c, ldc, mr, nr, accumulate);
  const auto* a = reinterpret_cast<const int32_t*>(a_words);
  const auto* b_packed = static_cast<const float*>(b);
  const auto* b_rows = static_cast<const uint16_t*>(b);
  const size_t pairs = (kc + 1) / 2;
  for (size_t m = 0; m < pairs; ++m) {
    next.step();
    __m512i w0, w1;
    if constexpr (kInPlaceB) {
      const uint16_t* lo_row = b_rows + 2 * m * ldb;  // (no pointer past the weight's last row)
      const __m512i lo = _mm512_loadu_si512(lo_row);
      const __m512i hi = 2 * m + 1 < kc ? _mm512_loadu_si512(lo_row + ldb) : _mm512_setzero_si512();
      interleave_pair_row(lo, hi, &w0, &w1);
      if constexpr (kCopyB) {
        _mm512_store_si512(b_copy, w0);
        _mm512_store_si512(b_copy + 16, w1);
        b_copy += kNR;
      }
    } else {
      w0 = _mm512_load_si512(b_packed);
      w1 = _mm512_load_si512(b_packed + 16);
      b_packed += kNR;
    }
    const __m512bh b0 = (__m512bh)w0, b1 = (__m512bh)w1;
#pragma GCC unroll 14
    for (size_t r = 0; r < kRows; ++r) {
      const __m512bh pair = (__m512bh)_mm512_set1_epi32(a[r * kRStep]);
      t.lo[r] = _mm512_dpbf16_ps(t.lo[r], b0, pair);
      t.hi[r] = _mm512_dpbf16_ps(t.hi[r], b1, pair);
    }
    a += kMStep;
  }
  t.store(c, ldc, mr, canonical_nans);
}

void bf16_gemm_ukernel_14x32__avx512bf16(size_t kc, const float* a_packed, const float* b_packed, float* c,
                                         size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                         const PrefetchRows& prefetch) {
  // The weight grad's grad_weight tiles come from DRAM, as in the f32
  // kernel (avx512/f32_gemm_ukernel_14x32__avx512f.cpp).
  // Only a call with rows to request carries their walk, as there.
  const avx512::CTilePrefetcher tile_lines(c, ldc, mr, nr, (kc + 1) / 2);
  if (prefetch.count == 0) {
    pair_tile_14x32<kMR, 1>(kc, a_packed, b_packed, c, ldc, mr, nr, accumulate, canonical_nans, tile_lines);
  } else {
    pair_tile_14x32<kMR, 1>(kc, a_packed, b_packed, c, ldc, mr, nr, accumulate, canonical_nans,
                            avx512::BothPrefetchers(tile_lines, avx512::RowsPrefetcher(prefetch)));
  }
}

void bf16_gemm_ukernel_14x32_rows_a__avx512bf16(size_t kc, const float* a_rows, const float* b_packed, float* c,
                                                size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                                                const PrefetchRows& prefetch) {
  avx512::with_tile_rows(mr, [&]<size_t kRows>() __attribute__((always_inline)) {
    pair_tile_14x32<1, kRowsALd, avx512::RowsPrefetcher, false, false, kRows>(
        kc, a_rows, b_packed, c, ldc, mr, nr, accumulate, canonical_nans, avx512::RowsPrefetcher(prefetch));
  });
}

// A 32-column panel of a bf16 B contiguous along its outer dimension (the
// forward's weight, grad-x's [G, N, K] one) read in place: the panel's
// first call interleaves two weight rows per pair step and packs the
// result for the panel's other calls, which saves the pack pass over the
// weight, whose rows feed only one expert's tile.
void bf16_gemm_ukernel_14x32_rows_a_in_place_b__avx512bf16(size_t kc, const float* a_rows, const void* b, size_t ldb,
                                                           float* b_packed, float* c, size_t ldc, size_t mr,
                                                           bool accumulate, bool canonical_nans,
                                                           const PrefetchRows& prefetch) {
  if (b_packed != nullptr) {  // a panel's first call of several: a full micro-panel
    pair_tile_14x32<1, kRowsALd, avx512::RowsPrefetcher, true, true>(kc, a_rows, b, c, ldc, mr, kNR, accumulate,
                                                                     canonical_nans, avx512::RowsPrefetcher(prefetch),
                                                                     ldb, b_packed);
    return;
  }
  avx512::with_tile_rows(mr, [&]<size_t kRows>() __attribute__((always_inline)) {
    pair_tile_14x32<1, kRowsALd, avx512::RowsPrefetcher, true, false, kRows>(
        kc, a_rows, b, c, ldc, mr, kNR, accumulate, canonical_nans, avx512::RowsPrefetcher(prefetch), ldb);
  });
}

// Copying rather than transposing grad_y rows, each micro-panel on first
// use while the call before requests the next one's rows, as the f32 engine
// does: fast bf16 large-token took 0.93x the time with 1 thread, 0.95x with
// 2 (the transposing pack was ~17 % of the run). Only bf16 runs in pairs.
constexpr PackGatheredRowsFn kPackAPairRows[kNumDTypes] = {nullptr, nullptr, pack_a_pair_rows};
constexpr InPlaceBUkernelFn kPairUkernelInPlaceB[kNumDTypes] = {nullptr, nullptr,
                                                                 bf16_gemm_ukernel_14x32_rows_a_in_place_b__avx512bf16};
constinit const RowsAKernels kPairRowsAKernels = {
    kRowsALd,
    avx512::kMaxStripKc,
    bf16_gemm_ukernel_14x32_rows_a__avx512bf16,
    kPackAPairRows,
    kPairUkernelInPlaceB,
};

// A[m][r] = pair (a[rows[r], n0+2m], a[rows[r], n0+2m+1]), zero for r >= mr:
// where the rows are consecutive and A is contiguous along them (the weight
// grad's x^T), each pair row interleaves two of x's rows; element by element
// otherwise.
void pack_a_pairs(const void* src, int64_t row_stride, int64_t col_stride, const int32_t* rows, size_t mr, size_t n0,
                  size_t kc, float* a_packed) {
  bool consecutive = row_stride == 1;
  for (size_t r = 1; r < mr && consecutive; ++r) consecutive = rows[r] == rows[0] + static_cast<int32_t>(r);
  if (!consecutive) {
    pack_a_pairs_strided(src, row_stride, col_stride, rows, mr, n0, kc, a_packed);
    return;
  }
  const auto* base = static_cast<const uint16_t*>(src) + rows[0];
  const __mmask16 lanes = first_lanes(mr), row = first_lanes(kMR);
  for (size_t m = 0; m < (kc + 1) / 2; ++m) {
    const uint16_t* lo = base + static_cast<int64_t>(n0 + 2 * m) * col_stride;
    const uint16_t* hi = 2 * m + 1 < kc ? lo + col_stride : nullptr;
    _mm512_mask_storeu_epi32(a_packed + m * kMR, row, interleave_rows(lo, hi, lanes));
  }
}

constexpr PackAFn kPackAPairs[kNumDTypes] = {nullptr, nullptr, pack_a_pairs};
constexpr PackBFn kPackBPairs[kNumDTypes] = {nullptr, nullptr, pack_b_pairs};
constinit const GemmKernels kPairKernels = {
    MOEGRAD_ISA_AVX512, kMR, kNR, bf16_gemm_ukernel_14x32__avx512bf16, kPackAPairs, kPackBPairs,
    avx512::f32_add_row__avx512f, avx512::f32_start_row__avx512f, &kPairRowvecKernels, &kPairRowsAKernels, 2,
};

}  // namespace

const GemmKernels& bf16_pair_kernels() { return kPairKernels; }

}  // namespace moegrad::kernels::avx512bf16
