// What this CPU and OS can execute, read once with CPUID + XGETBV.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moegrad::runtime {

struct CpuFeatures {
  bool avx2 = false;       // AVX2 + FMA + F16C, with OS-saved YMM state
  bool avx512f = false;    // AVX-512F (+ F16C, FMA), with OS-saved ZMM/opmask state
  bool avx512bf16 = false; // AVX512_BF16 (vdpbf16ps), on top of avx512f
  size_t l1d_bytes = 0;     // per-core data-cache sizes from sysconf; 0 when it
  size_t l2_bytes = 0;      // reports none or one outside the plausible range
  // The CPU family where the vendor is AMD (0x19: Zen 3 and 4, 0x1a: Zen 5),
  // 0 on any other vendor: for the tuning rules measured faster on one
  // generation and slower on another (driver/grad_x_driver.cpp's prefetch,
  // driver/rowvec_gemm.cpp's narrow kernel and strip requests).
  unsigned amd_family = 0;
};

// The family CPUID leaf 1 reports in EAX, as Intel's and AMD's manuals
// define it: the base family (bits 11:8), plus the extended family (bits
// 27:20) where the base is 0xf.
constexpr unsigned cpuid_family(uint32_t leaf1_eax) {
  const unsigned base = (leaf1_eax >> 8) & 0xfu;
  return base == 0xfu ? base + ((leaf1_eax >> 20) & 0xffu) : base;
}

// The CPUID and XCR0 words the instruction-set paths depend on, as read.
struct CpuidWords {
  uint32_t leaf1_ecx = 0;          // FMA 12, OSXSAVE 27, AVX 28, F16C 29
  uint64_t xcr0 = 0;               // XGETBV(0); 0 where OSXSAVE is clear
  uint32_t max_leaf = 0;           // leaf 0 EAX
  uint32_t leaf7_max_subleaf = 0;  // leaf 7 subleaf 0 EAX
  uint32_t leaf7_ebx = 0;          // AVX2 5, AVX512F 16, AVX512BW 30, AVX512VL 31
  uint32_t leaf7_1_eax = 0;        // AVX512_BF16 5; 0 where subleaf 1 is not read
};
inline constexpr uint32_t kOsxsaveBit = 1u << 27;

// Which paths those words allow (avx2, avx512f and avx512bf16; the other
// fields are left at their defaults): each needs its instructions and the
// OS-saved register state for them, and each builds on the one before.
CpuFeatures isa_features(const CpuidWords& words);

// Plausible per-core data-cache sizes (also the range MOEGRAD_L1D_BYTES and
// MOEGRAD_L2_BYTES must lie in).
inline constexpr size_t kMinL1dBytes = 16 * 1024, kMaxL1dBytes = 1024 * 1024;
inline constexpr size_t kMinL2Bytes = 128 * 1024, kMaxL2Bytes = 64 * 1024 * 1024;

// Detected once, thread-safe.
const CpuFeatures& cpu_features();

// The AMD family the drivers' speed rules follow (which last-panel calls,
// which prefetches: driver/rowvec_gemm.cpp, driver/grad_x_driver.cpp):
// cpu_features().amd_family, unless set_tuning_amd_family_for_tests chose
// another. Every rule keeps the bits, so a test can run each rule's code on
// any CPU with the ISA and hold it to the scalar path.
unsigned tuning_amd_family();
// family >= 0 replaces the detected family; -1 restores it. For tests
// only (not exported from the shared library); not for use while a run is
// in progress.
void set_tuning_amd_family_for_tests(int family);

}  // namespace moegrad::runtime
