// The per-ISA kernel table. The driver only ever calls kernels through it, so
// the loops are written once and every ISA path computes the same arithmetic:
//
//   C[r, c] = (accumulate ? C[r, c] : +0.0f), then for p = 0..kc-1:
//   C[r, c] = fma(A[p][r], B[p][c], C[r, c])
//
// i.e. each output element is one sequential f32 FMA chain (SPEC §5), whatever
// the register blocking; carrying C across kc blocks through memory does not
// change a single bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "moegrad/moegrad.h"

namespace moegrad::kernels {

// One MR x NR tile of C from packed panels: a_packed is [kc][MR], b_packed is
// [kc][NR] (zero-padded beyond mr / nr). Only the mr x nr corner of C is read
// (when accumulating) and written. c is row-major with leading dimension ldc.
// canonical_nans: every NaN element is stored as the canonical NaN
// (common/canonical_nan.h); set for the last reduction block of a tile
// stored straight into an output (the layer operators' direct tiles). Done
// in registers: read back after the store, the tile came from L2 at best.
// The weight grad, f32, 1024 tokens x 8 of 128 experts, K 2048, N 768, took
// 1.15x (one thread) and 1.5x (two) the time of no pass with a scalar pass
// over the whole tile, 1.10x and 1.22x with a vector pass that stores only
// NaNs, and more with one over each micro-tile just stored; with two
// threads 1.01x in registers.
// prefetch: lines to request while the call runs (the driver's: the next
// reduction block's operands), which the scalar kernels ignore.
struct PrefetchRows;
using GemmUkernelFn = void (*)(size_t kc, const float* a_packed, const float* b_packed, float* c,
                               size_t ldc, size_t mr, size_t nr, bool accumulate, bool canonical_nans,
                               const PrefetchRows& prefetch);

// The packers serve every operator's GEMM (driver/packed_gemm.h), so they
// name their operands A and B, not grad-x's tensors: A is the operand whose
// rows are gathered (grad-x: grad_y; the forward: x), B the one whose
// outer rows are taken in a range (grad-x: weight[g] seen as [K, N]); p
// runs along the reduction, from p0 (called n0: grad-x reduces over N).
//
// Packs A's rows rows[0..mr), reduction [n0, n0 + kc) as A[p][MR], widened
// to f32, rows mr..MR-1 zero. Element (i, p) lives at src + i*row_stride +
// p*col_stride (strides in elements). rows must be strictly ascending (every caller's
// are): the vector packers read rows[0]..rows[mr-1] as one block when the
// two ends are mr - 1 apart.
using PackAFn = void (*)(const void* src, int64_t row_stride, int64_t col_stride,
                         const int32_t* rows, size_t mr, size_t n0, size_t kc, float* a_packed);

// Packs B's outer rows [k0, k0 + nr), reduction [n0, n0 + kc) as B[p][NR] =
// B[k0 + c][n0 + p], widened to f32, columns nr..NR-1 zero. Element (c, p)
// lives at src + c*k_stride + p*n_stride (k_stride: GemmOperand's
// outer_stride, n_stride: its reduce_stride).
using PackBFn = void (*)(const void* src, int64_t k_stride, int64_t n_stride, size_t k0, size_t nr,
                         size_t n0, size_t kc, float* b_packed);

// dst[j] += src[j] for j < n: one f32 add per element, the scatter-add step.
// A NaN sum is stored as the canonical NaN (common/canonical_nan.h), here
// and in every other store of a sum into grad_x.
using AddRowFn = void (*)(float* dst, const float* src, size_t n);

// Packs gathered grad_y rows rows[0..count), columns [n0, n0 + kc), from a
// grad_y contiguous along the reduction (row i at src + i*row_stride); the
// layout is the engine's (below).
using PackGatheredRowsFn = void (*)(const void* src, int64_t row_stride, const int32_t* rows, size_t count,
                                    size_t n0, size_t kc, float* out);

// What a row-vector kernel call does toward the next weight strip while it
// computes (rows far apart, which the hardware prefetchers would not
// anticipate). The strip's source is a rectangle of `rows` rows of `lines`
// cache lines each, starting at `first`, `stride` bytes apart, its lines
// numbered row by row; the call handles lines [begin, end), spread evenly
// over its reduction steps:
//  - copy_to == nullptr: requests them, into L1 or (to_l2) into L2 only;
//  - otherwise (whole lines of a strip whose rows are the weight rows' bytes
//    unchanged: RowvecKernels::raw_strip): copies line l of row c to
//    copy_to + c * copy_ld + 16 * l (in 32-bit words), so the next block's
//    strip is ready when the call returns and no separate copy waits on the
//    memory system.
struct NextStrip {
  const std::byte* first = nullptr;
  int64_t stride = 0;
  size_t rows = 0;
  size_t lines = 0;
  size_t begin = 0, end = 0;
  bool to_l2 = false;
  float* copy_to = nullptr;
  size_t copy_ld = 0;
};

// The same, for gathered rows: line l < lines of row i < count lies at
// first + rows[i] * stride + 64 * l (the next grad_y rows a slot copies, or
// the grad_x rows its scatter-add will update, which come in an order no
// hardware prefetcher follows); into L1, or (to_l2) into L2 only.
struct PrefetchRows {
  const std::byte* first = nullptr;
  const int32_t* rows = nullptr;
  int64_t stride = 0;
  size_t count = 0;
  size_t lines = 0;
  bool to_l2 = false;
};

using RowvecUkernelFn = void (*)(size_t kc, const float* w_strip, const float* a_panel, float* ct, size_t ldct,
                                 size_t rows, size_t cols, bool accumulate, const NextStrip& next);
using RowvecCopyStripFn = void (*)(const void* src, int64_t k_stride, size_t k0, size_t count, size_t n0,
                                   size_t kc, float* w_strip);
using AddColsFn = void (*)(const float* ct, size_t ldct, size_t rows, size_t cols, float* dst, int64_t dst_stride,
                           const int32_t* tokens, bool add, const uint8_t* starts);

// The row-vector engine (AVX-512 and AVX2): the transpose of the tile above,
// vectorised along grad_y rows instead of weight rows. The weight is only
// copied (never transposed) into a strip, so an expert whose weight is used
// by few rows does not pay a transpose per weight element:
//
//   Ct[c][r] = (accumulate ? Ct[c][r] : +0.0f), then for p = 0..kc-1:
//   Ct[c][r] = fma(A[p][r], W[c][p], Ct[c][r])
//
// The same FMA chain per element as GemmUkernelFn, hence the same bits.
struct RowvecKernels {
  size_t strip;         // weight rows (grad_x columns) per strip: STRIP
  size_t panel;         // grad_y rows per panel: PANEL (two vectors: 32 on AVX-512, 16 on AVX2)
  size_t max_kc;        // the longest reduction block a strip holds
  size_t per_word;      // reduction elements per 32-bit word of strips and panels:
                        // 1 (widened to f32), 2 (bf16 pairs, the fast mode)
  size_t strip_ld;      // floats from one strip row to the next: STRIP_LD
  size_t strip_floats;  // size of one strip buffer
  // Ct tile from a strip ([STRIP][STRIP_LD]) and a panel ([kc][PANEL], rows
  // >= `rows` zero). ct is [cols][ldct]; rows are computed in whole vectors
  // (16-row zmm and, for a short last panel, one 8-row ymm on AVX-512; 8 on
  // AVX2; up to round_up(rows, 16) <= ldct), and
  // only Ct rows c < cols are read and written. Meanwhile it does `next`'s
  // share of staging the next strip (NextStrip), in a buffer other than
  // w_strip.
  RowvecUkernelFn ukernel;
  // A[p][r] = grad_y[rows[r], n0 + p] for r < count (<= PANEL), zero up to
  // PANEL, widened to f32; grad_y's reduction dimension must be contiguous.
  const PackGatheredRowsFn* pack_panel;  // [kNumDTypes]
  // W[c][p] = weight_g[k0 + c, n0 + p] for c < count (<= STRIP), zero rows up
  // to STRIP, widened to f32; the weight's N dimension must be contiguous.
  const RowvecCopyStripFn* copy_strip;  // [kNumDTypes]
  // The dtypes whose strip rows hold the weight rows' bytes unchanged (f32;
  // bf16 pairs in the fast mode): the kernel call can copy those strips
  // (NextStrip::copy_to); the others are widened by copy_strip.
  bool raw_strip[kNumDTypes];
  // The scatter-add, transposing: for r < rows in ascending order,
  // dst[tokens[r]*dst_stride + j] += ct[j*ldct + r] for j < cols; = 0 + ct
  // where starts (may be null) has starts[r] != 0 (a token's first add, so
  // dst is not read); or = ct for every row when !add (the non-fused path
  // writing d_expanded_x). Sums store NaNs as the canonical NaN; the !add
  // copy leaves them for the non-fused scatter-add's sums.
  AddColsFn add_cols;
  // A slot's last panel of at most narrow_rows rows (0: none), or the rows
  // of a last panel past its first vector (a_panel and ct then point that
  // many rows in), computed with vectors along the strip's weight rows
  // instead (same Ct, same bits; the strip is transposed in registers): a
  // grad_y-row vector would be mostly lanes of padding. Same contract as
  // ukernel otherwise (it writes Ct[c][r] for r < 16). The driver decides
  // where it pays.
  RowvecUkernelFn narrow_ukernel;
  size_t narrow_rows;

  // The words that n reduction elements take in a strip or panel row (bf16
  // pairs: an odd n ends with a half-filled word).
  size_t words(size_t n) const { return (n + per_word - 1) / per_word; }
};

// The packed engine with the A micro-panel copied rather than transposed
// (AVX-512, AVX2; grad_y contiguous along the reduction): [MR][ld] row-major, the
// micro-kernel broadcasting A[r][p] from it. Same FMA chain per element.
// The fast bf16 mode's table copies raw bf16 rows instead: pair m of row r
// is 32-bit word m of A row r, broadcast as the pair kernel's A pair.
using InPlaceBUkernelFn = void (*)(size_t kc, const float* a_rows, const void* b, size_t ldb, float* b_packed,
                                   float* c, size_t ldc, size_t mr, bool accumulate, bool canonical_nans,
                                   const PrefetchRows& prefetch);
struct RowsAKernels {
  size_t ld;      // floats (32-bit words) per copied row (>= max_kc)
  size_t max_kc;  // the longest reduction block a row holds
  // a_packed is [MR][ld]; asks for `prefetch`'s lines while it computes.
  void (*ukernel)(size_t kc, const float* a_rows, const float* b_packed, float* c, size_t ldc, size_t mr, size_t nr,
                  bool accumulate, bool canonical_nans, const PrefetchRows& prefetch);
  // A[r][p] = src[rows[r] * row_stride + n0 + p] for r < count (<= MR),
  // widened to f32, rows count..MR-1 zero (fast bf16: the row's pairs, an
  // odd kc padded with a zero element). Null for a dtype the table does not
  // take, which then packs transposed (pack_a).
  const PackGatheredRowsFn* pack;  // [kNumDTypes]
  // The ukernel with a B of that dtype read in place (nr = NR), rows ldb
  // elements apart, and stored packed (as the table's pack_b stores it,
  // 64-byte aligned) to b_packed as it is read unless that is null. Never
  // null, with an entry for every dtype `pack` takes: the driver packs such
  // a B up front only where A is packed transposed.
  const InPlaceBUkernelFn* ukernel_in_place_b;  // [kNumDTypes]
};

struct GemmKernels {
  moegrad_isa isa;
  size_t mr;
  size_t nr;
  GemmUkernelFn ukernel;
  const PackAFn* pack_a;  // [kNumDTypes], indexed by DType
  const PackBFn* pack_b;  // [kNumDTypes]
  AddRowFn add_row;
  // dst[j] = 0 + src[j] for j < n: a sum's first add (SPEC §5), dst not read.
  AddRowFn start_row;
  const RowvecKernels* rowvec;  // nullptr where the ISA has no row-vector engine
  const RowsAKernels* rows_a;   // nullptr where A is always transposed
  // Reduction elements per packed row of A and B: 1, or 2 for the fast
  // bf16 mode's pairs (a row of B then holds pair p/2 of each column).
  size_t per_word = 1;
};

// Floats of packed A for `rows` rows and reduction block kc, in either layout.
inline size_t a_pack_floats(const GemmKernels& k, size_t rows, size_t kc) {
  const size_t per_row = k.rows_a != nullptr && k.rows_a->ld > kc ? k.rows_a->ld : kc;
  return (rows + k.mr - 1) / k.mr * k.mr * per_row;
}

// Every table is a constinit object: a lazily built one would have a guard
// that a fork() could leave held (runtime/cpu_features.cpp says why).

// The table for an ISA (never AUTO); nullptr if this CPU cannot run it.
const GemmKernels* gemm_kernels_for(moegrad_isa isa);

// The best ISA this CPU runs.
moegrad_isa best_isa();

// The fast bf16 mode's table for an ISA: the scalar emulation, or the
// AVX512_BF16 kernel for AVX512 on a CPU that has it; nullptr otherwise.
// Its panels hold bf16 pairs, and kc blocks other than the last must be even.
const GemmKernels* bf16_pair_kernels_for(moegrad_isa isa);

namespace scalar {
const GemmKernels& gemm_kernels();
const GemmKernels& bf16_pair_kernels();
}  // namespace scalar
namespace avx2 { const GemmKernels& gemm_kernels(); }
namespace avx512 { const GemmKernels& gemm_kernels(); }
namespace avx512bf16 { const GemmKernels& bf16_pair_kernels(); }

}  // namespace moegrad::kernels
