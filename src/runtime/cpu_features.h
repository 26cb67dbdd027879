// What this CPU and OS can execute, read once with CPUID + XGETBV.
#pragma once

namespace moegrad::runtime {

struct CpuFeatures {
  bool avx2 = false;       // AVX2 + FMA + F16C, with OS-saved YMM state
  bool avx512f = false;    // AVX-512F (+ F16C, FMA), with OS-saved ZMM/opmask state
  bool avx512bf16 = false; // AVX512_BF16 (vdpbf16ps), on top of avx512f
  int l1d_bytes = 48 * 1024;      // data-cache sizes, from sysconf; sane defaults
  long l2_bytes = 1024 * 1024;
};

// Detected once, thread-safe.
const CpuFeatures& cpu_features();

}  // namespace moegrad::runtime
