#include "kernels/scalar/kernels__scalar.h"

namespace moegrad::kernels::scalar {

const GemmKernels& gemm_kernels() {
  static const GemmKernels table = {
      MOEGRAD_ISA_SCALAR,
      kMR,
      kNR,
      f32_gemm_ukernel_4x8__scalar,
      {pack_a_4__scalar[0], pack_a_4__scalar[1], pack_a_4__scalar[2]},
      {pack_b_8__scalar[0], pack_b_8__scalar[1], pack_b_8__scalar[2]},
      f32_add_row__scalar,
      nullptr,
      nullptr,
  };
  return table;
}

}  // namespace moegrad::kernels::scalar
