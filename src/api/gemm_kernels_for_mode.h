// The kernel table a GEMM runs for its context's ISA and fast bf16 mode:
// the one choice grad-x and the layer GEMMs make alike.
#pragma once

#include "common/dtype.h"
#include "kernels/gemm_kernels.h"
#include "moegrad/moegrad.h"

namespace moegrad {

// *k = exact (the ISA's table), or for bf16 in the fast bf16 mode the
// ISA's pair table. The mode changes the order, so it is never replaced by
// the exact table where the ISA has none: MOEGRAD_STATUS_ISA_UNAVAILABLE,
// its message prefixed with `who` ("" for none).
moegrad_status gemm_kernels_for_mode(moegrad_isa isa, bool fast_bf16, DType dtype, const char* who,
                                     const kernels::GemmKernels* exact, const kernels::GemmKernels** k);

}  // namespace moegrad
