#include "api/gemm_kernels_for_mode.h"

#include "common/error.h"

namespace moegrad {

moegrad_status gemm_kernels_for_mode(moegrad_isa isa, bool fast_bf16, DType dtype, const char* who,
                                     const kernels::GemmKernels* exact, const kernels::GemmKernels** k) {
  *k = exact;
  if (!fast_bf16 || dtype != DType::kBF16) return MOEGRAD_STATUS_SUCCESS;
  *k = kernels::bf16_pair_kernels_for(isa);
  if (*k != nullptr) return MOEGRAD_STATUS_SUCCESS;
  return fail(MOEGRAD_STATUS_ISA_UNAVAILABLE,
              "%s%sfast bf16 mode needs AVX512_BF16 with ISA avx512 (or ISA scalar, its emulation); context ISA is %s",
              who, *who != '\0' ? ": " : "", moegrad_isa_name(isa));
}

}  // namespace moegrad
