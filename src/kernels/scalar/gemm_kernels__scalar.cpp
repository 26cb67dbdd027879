#include "kernels/scalar/kernels__scalar.h"

namespace moegrad::kernels::scalar {

namespace {

constinit const GemmKernels kGemmKernels = {
    MOEGRAD_ISA_SCALAR,
    kMR,
    kNR,
    f32_gemm_ukernel_4x8__scalar,
    pack_a_4__scalar,
    pack_b_8__scalar,
    f32_add_row__scalar,
    f32_start_row__scalar,
    nullptr,
    nullptr,
};

}  // namespace

const GemmKernels& gemm_kernels() { return kGemmKernels; }

}  // namespace moegrad::kernels::scalar
