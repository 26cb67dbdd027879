#include "kernels/avx2/kernels__avx2.h"

namespace moegrad::kernels::avx2 {

const GemmKernels& gemm_kernels() {
  static const GemmKernels table = {
      MOEGRAD_ISA_AVX2,
      kMR,
      kNR,
      f32_gemm_ukernel_6x16__avx2,
      {pack_a_6__avx2[0], pack_a_6__avx2[1], pack_a_6__avx2[2]},
      {pack_b_16__avx2[0], pack_b_16__avx2[1], pack_b_16__avx2[2]},
      f32_add_row__avx2,
      nullptr,
      nullptr,
  };
  return table;
}

}  // namespace moegrad::kernels::avx2
