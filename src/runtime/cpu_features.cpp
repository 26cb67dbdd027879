#include "runtime/cpu_features.h"

#include <cpuid.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace moegrad::runtime {
namespace {

// XCR0 says which register state the OS saves on context switch; a CPU that
// has AVX-512 under an OS that does not save ZMM state must not use it.
uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

// The per-core data caches the OS reports, whatever the instruction set
// (the scalar path's blocks are fitted to them too).
void detect_caches(CpuFeatures* f) {
  const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const auto plausible = [](long v, size_t lo, size_t hi) {
    return v > 0 && static_cast<size_t>(v) >= lo && static_cast<size_t>(v) <= hi ? static_cast<size_t>(v) : 0;
  };
  f->l1d_bytes = plausible(l1, kMinL1dBytes, kMaxL1dBytes);
  f->l2_bytes = plausible(l2, kMinL2Bytes, kMaxL2Bytes);
}

CpuFeatures detect() {
  CpuFeatures f;
  detect_caches(&f);
  unsigned a = 0, b = 0, c = 0, d = 0;
  // Leaf 0's vendor string is EBX, EDX, ECX: "Auth" "enti" "cAMD".
  const bool amd = __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  if (amd) f.amd_family = cpuid_family(a);
  CpuidWords w;
  w.leaf1_ecx = c;
  // xgetbv faults where the OS has not enabled XSAVE (OSXSAVE clear).
  if (c & kOsxsaveBit) w.xcr0 = read_xcr0();
  w.max_leaf = __get_cpuid_max(0, nullptr);
  if (w.max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    w.leaf7_max_subleaf = a;
    w.leaf7_ebx = b;
    if (w.leaf7_max_subleaf >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      w.leaf7_1_eax = a;
    }
  }
  const CpuFeatures isa = isa_features(w);
  f.avx2 = isa.avx2;
  f.avx512f = isa.avx512f;
  f.avx512bf16 = isa.avx512bf16;
  return f;
}

CpuFeatures g_features;  // constant-initialised; written once, by detect_once
pthread_once_t g_detected = PTHREAD_ONCE_INIT;
std::atomic<int> g_tuning_family_override{-1};  // tests only; -1: the detected family

void detect_once() { g_features = detect(); }

}  // namespace

CpuFeatures isa_features(const CpuidWords& w) {
  CpuFeatures f;
  const bool osxsave = w.leaf1_ecx & kOsxsaveBit;
  const bool fma = w.leaf1_ecx & (1u << 12);
  const bool avx = w.leaf1_ecx & (1u << 28);
  const bool f16c = w.leaf1_ecx & (1u << 29);
  if (!osxsave || !avx || w.max_leaf < 7) return f;
  const bool ymm_state = (w.xcr0 & 0x6) == 0x6;    // SSE + AVX
  const bool zmm_state = (w.xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool avx2 = w.leaf7_ebx & (1u << 5);
  const bool avx512f = w.leaf7_ebx & (1u << 16);
  const bool avx512bw = w.leaf7_ebx & (1u << 30);
  const bool avx512vl = w.leaf7_ebx & (1u << 31);
  // Subleaf 1 exists only where subleaf 0 says so; beyond that, what CPUID
  // returns is not defined to be zero on every hypervisor.
  const bool avx512bf16 = w.leaf7_max_subleaf >= 1 && (w.leaf7_1_eax & (1u << 5));
  f.avx2 = avx2 && fma && f16c && ymm_state;
  f.avx512f = f.avx2 && avx512f && zmm_state;
  // The avx512bf16 folder is compiled with -mavx512bf16, which implies
  // AVX512BW in GCC, so the compiler may use BW instructions there too, and
  // with -mavx512vl for the 256-bit vdpbf16ps of short tails. Every such CPU
  // has BW and VL, but a hypervisor may hide one and not the other.
  f.avx512bf16 = f.avx512f && avx512bw && avx512vl && avx512bf16;
  return f;
}

// pthread_once, not a function-local static: a fork() while another thread
// is inside detect() must not hand the child a guard that stays "being
// initialised" forever (libstdc++'s guards would; glibc's pthread_once
// notices the fork and runs detect() again in the child). One-time state in
// this library follows that rule; tests/no_lazy_statics_test.sh checks it.
const CpuFeatures& cpu_features() {
  pthread_once(&g_detected, detect_once);
  return g_features;
}

unsigned tuning_amd_family() {
  const int family = g_tuning_family_override.load(std::memory_order_relaxed);
  return family >= 0 ? static_cast<unsigned>(family) : cpu_features().amd_family;
}

void set_tuning_amd_family_for_tests(int family) {
  g_tuning_family_override.store(family < 0 ? -1 : family, std::memory_order_relaxed);
}

}  // namespace moegrad::runtime
