#include "kernels/gemm_kernels.h"

#include "runtime/cpu_features.h"

namespace moegrad::kernels {

const GemmKernels* gemm_kernels_for(moegrad_isa isa) {
  const auto& cpu = runtime::cpu_features();
  switch (isa) {
    case MOEGRAD_ISA_SCALAR: return &scalar::gemm_kernels();
    case MOEGRAD_ISA_AVX2: return cpu.avx2 ? &avx2::gemm_kernels() : nullptr;
    case MOEGRAD_ISA_AVX512: return cpu.avx512f ? &avx512::gemm_kernels() : nullptr;
    case MOEGRAD_ISA_AUTO: break;
  }
  return nullptr;
}

const GemmKernels* bf16_pair_kernels_for(moegrad_isa isa) {
  if (isa == MOEGRAD_ISA_SCALAR) return &scalar::bf16_pair_kernels();
  if (isa == MOEGRAD_ISA_AVX512 && runtime::cpu_features().avx512bf16) return &avx512bf16::bf16_pair_kernels();
  return nullptr;
}

moegrad_isa best_isa() {
  const auto& cpu = runtime::cpu_features();
  if (cpu.avx512f) return MOEGRAD_ISA_AVX512;
  if (cpu.avx2) return MOEGRAD_ISA_AVX2;
  return MOEGRAD_ISA_SCALAR;
}

}  // namespace moegrad::kernels
