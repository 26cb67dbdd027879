// What this CPU and OS can execute, read once with CPUID + XGETBV.
#pragma once

#include <cstddef>

namespace moegrad::runtime {

struct CpuFeatures {
  bool avx2 = false;       // AVX2 + FMA + F16C, with OS-saved YMM state
  bool avx512f = false;    // AVX-512F (+ F16C, FMA), with OS-saved ZMM/opmask state
  bool avx512bf16 = false; // AVX512_BF16 (vdpbf16ps), on top of avx512f
  size_t l1d_bytes = 0;     // per-core data-cache sizes from sysconf; 0 when it
  size_t l2_bytes = 0;      // reports none or one outside the plausible range
};

// Plausible per-core data-cache sizes (also the range MOEGRAD_L1D_BYTES and
// MOEGRAD_L2_BYTES must lie in).
inline constexpr size_t kMinL1dBytes = 16 * 1024, kMaxL1dBytes = 1024 * 1024;
inline constexpr size_t kMinL2Bytes = 128 * 1024, kMaxL2Bytes = 64 * 1024 * 1024;

// Detected once, thread-safe.
const CpuFeatures& cpu_features();

}  // namespace moegrad::runtime
