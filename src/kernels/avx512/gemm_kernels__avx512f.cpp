#include "kernels/avx512/kernels__avx512f.h"

namespace moegrad::kernels::avx512 {

namespace {

constinit const RowvecKernels kRowvecKernels = {
    kStrip,
    kPanel,
    kMaxStripKc,
    1,
    kStripLd,
    kStrip * kStripLd,
    f32_rowvec_ukernel_14x32__avx512f,
    pack_panel_32__avx512f,
    copy_strip_14__avx512f,
    {true, false, false},
    f32_add_cols__avx512f,
    f32_rowvec_narrow_ukernel_14x12__avx512f,
    kNarrowRows,
};

constinit const RowsAKernels kRowsAKernels = {
    kRowsALd,
    kMaxStripKc,
    f32_gemm_ukernel_14x32_rows_a__avx512f,
    pack_a_rows_14__avx512f,
    gemm_ukernel_14x32_rows_a_in_place_b__avx512f,
};

constinit const GemmKernels kGemmKernels = {
    MOEGRAD_ISA_AVX512,
    kMR,
    kNR,
    f32_gemm_ukernel_14x32__avx512f,
    pack_a_14__avx512f,
    pack_b_32__avx512f,
    f32_add_row__avx512f,
    f32_start_row__avx512f,
    &kRowvecKernels,
    &kRowsAKernels,
};

}  // namespace

const GemmKernels& gemm_kernels() { return kGemmKernels; }

}  // namespace moegrad::kernels::avx512
