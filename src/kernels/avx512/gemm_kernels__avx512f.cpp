#include "kernels/avx512/kernels__avx512f.h"

namespace moegrad::kernels::avx512 {

const RowvecKernels& rowvec_kernels() {
  static const RowvecKernels table = {
      kStrip,
      kPanel,
      kMaxStripKc,
      1,
      kStripLd,
      kStrip * kStripLd,
      f32_rowvec_ukernel_14x32__avx512f,
      {pack_panel_32__avx512f[0], pack_panel_32__avx512f[1], pack_panel_32__avx512f[2]},
      {copy_strip_14__avx512f[0], copy_strip_14__avx512f[1], copy_strip_14__avx512f[2]},
      {true, false, false},
      f32_add_cols__avx512f,
  };
  return table;
}

const RowsAKernels& rows_a_kernels() {
  static const RowsAKernels table = {
      kRowsALd,
      kMaxStripKc,
      f32_gemm_ukernel_14x32_rows_a__avx512f,
      {pack_a_rows_14__avx512f[0], pack_a_rows_14__avx512f[1], pack_a_rows_14__avx512f[2]},
  };
  return table;
}

const GemmKernels& gemm_kernels() {
  static const GemmKernels table = {
      MOEGRAD_ISA_AVX512,
      kMR,
      kNR,
      f32_gemm_ukernel_14x32__avx512f,
      {pack_a_14__avx512f[0], pack_a_14__avx512f[1], pack_a_14__avx512f[2]},
      {pack_b_32__avx512f[0], pack_b_32__avx512f[1], pack_b_32__avx512f[2]},
      f32_add_row__avx512f,
      &rowvec_kernels(),
      &rows_a_kernels(),
  };
  return table;
}

}  // namespace moegrad::kernels::avx512
