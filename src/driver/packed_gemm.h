// The packed GEMM engine (BLIS's macro-kernel): packing and micro-kernel
// loops around one output tile. Every operator describes its operands with
// GemmOperand; the layer operators always call packed_gemm_tile, grad-x
// where the plan does not choose the row-vector engine (rowvec_gemm.h),
// which computes every element with the same FMA chain.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "kernels/gemm_kernels.h"

namespace moegrad::driver {

// A matrix seen as [outer, reduce]: element (o, p) at data + o*outer_stride +
// p*reduce_stride (element strides, any sign).
struct GemmOperand {
  const void* data;
  int64_t outer_stride;
  int64_t reduce_stride;
};

// Per-worker packing buffers carved from a workspace.
struct PackScratch {
  float* a_pack;  // >= kernels::a_pack_floats(rows, kc)
  float* b_pack;  // >= round_up(cols, NR) * kc floats
  // Identify the A block a_pack and the B panel b_pack hold when the whole
  // reduction fits one kc block, so consecutive tiles with the same A or B
  // skip repacking it (-1: none).
  int64_t a_key = -1;
  int64_t b_key = -1;
};

struct GemmBlocking {
  const kernels::GemmKernels* kernels;
  DType dtype;
  size_t kc;  // reduction block
  // c is an output no later step stores again (a layer operator's direct
  // tile): the micro-kernel stores each micro-tile's last reduction block
  // with its NaNs made the canonical NaN (common/canonical_nan.h).
  bool canonical_nans = false;
};

// c[r, j] = sum_{p in [p0, p0 + len)} A[rows[r], p] * B[j0 + j, p] for
// r < count, j < cols, as one fp32 FMA chain per element in ascending p,
// starting at +0.0 (SPEC §5). c has leading dimension ldc. a_key, b_key: a
// caller's names for this A block (its rows and reduction range) and this B
// panel (>= 0 enables reuse across calls with the same scratch), or -1. A is
// reused only where it is packed transposed (a copied-rows A is copied
// micro-panel by micro-panel as the kernel first reads it).
// A B contiguous along its outer dimension, rows a positive stride apart,
// is read in place where A is copied rows (the copied-rows kernels of
// AVX-512 and AVX2, and of the fast bf16 mode's AVX512_BF16 table:
// RowsAKernels::ukernel_in_place_b), unless b_key names the panel the
// scratch already holds: each full micro-panel by its first kernel call,
// which packs it for the others (by every call where the rows take at most
// two micro-panels), the last narrower one packed up front. Any other B contiguous along its outer
// dimension (A then packed transposed) is packed a few reduction steps at
// a time across all panels, and the kernel calls request the next
// reduction block's rows into L2 meanwhile: B's, and A's where A too is
// contiguous along its outer dimension, rows ascending.
// dest_rows: rows the caller will update with c's rows once the tile is done
// (row r of c into dest_rows->rows[r]; count rows), or null; their lines are
// requested while the tile's last column pass runs (unless that is also the
// first, whose calls request the next grad_y rows instead; the copied-rows
// kernels only).
void packed_gemm_tile(const GemmBlocking& blk, const GemmOperand& a, const int32_t* rows, size_t count,
                      const GemmOperand& b, size_t j0, size_t cols, int64_t p0, int64_t len, float* c,
                      size_t ldc, PackScratch* scratch, int64_t a_key, int64_t b_key,
                      const kernels::PrefetchRows* dest_rows = nullptr);

}  // namespace moegrad::driver
