#include "kernels/avx2/kernels__avx2.h"

namespace moegrad::kernels::avx2 {

const RowvecKernels& rowvec_kernels() {
  static const RowvecKernels table = {
      kStrip,
      kPanel,
      kMaxStripKc,
      1,
      kStripLd,
      kStrip * kStripLd,
      f32_rowvec_ukernel_6x16__avx2,
      {pack_panel_16__avx2[0], pack_panel_16__avx2[1], pack_panel_16__avx2[2]},
      {copy_strip_6__avx2[0], copy_strip_6__avx2[1], copy_strip_6__avx2[2]},
      {true, false, false},
      f32_add_cols__avx2,
  };
  return table;
}

const RowsAKernels& rows_a_kernels() {
  static const RowsAKernels table = {
      kRowsALd,
      kMaxStripKc,
      f32_gemm_ukernel_6x16_rows_a__avx2,
      {pack_a_rows_6__avx2[0], pack_a_rows_6__avx2[1], pack_a_rows_6__avx2[2]},
  };
  return table;
}

const GemmKernels& gemm_kernels() {
  static const GemmKernels table = {
      MOEGRAD_ISA_AVX2,
      kMR,
      kNR,
      f32_gemm_ukernel_6x16__avx2,
      {pack_a_6__avx2[0], pack_a_6__avx2[1], pack_a_6__avx2[2]},
      {pack_b_16__avx2[0], pack_b_16__avx2[1], pack_b_16__avx2[2]},
      f32_add_row__avx2,
      &rowvec_kernels(),
      &rows_a_kernels(),
  };
  return table;
}

}  // namespace moegrad::kernels::avx2
