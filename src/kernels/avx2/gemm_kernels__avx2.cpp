#include "kernels/avx2/kernels__avx2.h"

namespace moegrad::kernels::avx2 {

namespace {

constinit const RowvecKernels kRowvecKernels = {
    kStrip,
    kPanel,
    kMaxStripKc,
    1,
    kStripLd,
    kStrip * kStripLd,
    f32_rowvec_ukernel_6x16__avx2,
    pack_panel_16__avx2,
    copy_strip_6__avx2,
    {true, false, false},
    f32_add_cols__avx2,
    nullptr,
    0,
};

constinit const RowsAKernels kRowsAKernels = {
    kRowsALd,
    kMaxStripKc,
    f32_gemm_ukernel_6x16_rows_a__avx2,
    pack_a_rows_6__avx2,
    gemm_ukernel_6x16_rows_a_in_place_b__avx2,
};

constinit const GemmKernels kGemmKernels = {
    MOEGRAD_ISA_AVX2,
    kMR,
    kNR,
    f32_gemm_ukernel_6x16__avx2,
    pack_a_6__avx2,
    pack_b_16__avx2,
    f32_add_row__avx2,
    f32_start_row__avx2,
    &kRowvecKernels,
    &kRowsAKernels,
};

}  // namespace

const GemmKernels& gemm_kernels() { return kGemmKernels; }

}  // namespace moegrad::kernels::avx2
