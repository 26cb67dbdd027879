// The row-vector GEMM engine (AVX-512, AVX2): the grad-x tile computed
// transposed, Ct[j][r] = sum_p grad_y[rows[r], p] * weight_g[j0 + j, p], with
// grad_y rows transposed into panels and weight rows merely copied into
// strips. It pays off when an expert's weight serves few rows, where packing
// (transposing) every weight element for the classic engine costs more than
// the GEMM's reuse of it can hide. Same FMA chain per element as
// packed_gemm_tile.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "driver/packed_gemm.h"
#include "kernels/gemm_kernels.h"

namespace moegrad::driver {

struct RowvecScratch {
  float* panels;   // >= round_up(count, PANEL) * the span's words (GradXPlan::panel_words)
  float* w_strip;  // >= 2 * strip_floats (two strip buffers)
};

// How a slot of `count` >= 1 rows computes its last panel (the rows past
// its whole panels, or a whole last one): the first `main` rows with
// k.ukernel, the next `narrow` with k.narrow_ukernel (either may be 0).
// Chosen per CPU; the same bits either way.
struct LastPanelCalls {
  size_t main, narrow;
};
LastPanelCalls last_panel_calls(const kernels::RowvecKernels& k, size_t count);

// ct[j*ldct + r] = sum_{p < n} A[rows[r], p] * B[j0 + j, p] for r < count,
// j < cols; one fp32 FMA chain per element in ascending p, from +0.0
// (SPEC §5). A and B must be contiguous along p (reduce_stride 1); kc <=
// k.max_kc; pack_span a multiple of kc; ldct >= round_up(count, 16);
// count >= 1 and n >= 1 (grad_x's N = 0 is refused by validation, so no
// call reduces over nothing).
void rowvec_gemm_tile(const kernels::RowvecKernels& k, DType dtype, size_t kc, size_t pack_span, const GemmOperand& a,
                      const int32_t* rows, size_t count, const GemmOperand& b, size_t j0, size_t cols, int64_t n,
                      float* ct, size_t ldct, const RowvecScratch& scratch);

}  // namespace moegrad::driver
