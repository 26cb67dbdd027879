// runtime/cpu_features: the CPU family decoded from CPUID leaf 1, checked
// against the families the vendors' manuals and /proc/cpuinfo give, the
// AMD family the library records (a prefetch in driver/grad_x_driver.cpp
// depends on it), and which instruction-set paths the CPUID and XCR0 words
// allow.
#include <cpuid.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/cpu_features.h"
#include "runtime/cpu_model.h"

namespace {

using moegrad::runtime::cpuid_family;

// Leaf 1 EAX: stepping 3:0, model 7:4, family 11:8, extended model 19:16,
// extended family 27:20.
constexpr uint32_t leaf1_eax(uint32_t family, uint32_t model, uint32_t stepping, uint32_t ext_model,
                             uint32_t ext_family) {
  return stepping | model << 4 | family << 8 | ext_model << 16 | ext_family << 20;
}

TEST(CpuidFamily, AddsTheExtendedFamilyOnlyToBase0xf) {
  // AMD Zen 5 (EPYC 9005, family 1Ah = 0xf + 0xb), as this project's VM
  // reports it: family 26, model 2, stepping 1.
  EXPECT_EQ(cpuid_family(leaf1_eax(0xf, 0x2, 1, 0x0, 0xb)), 26u);
  // AMD Zen 4 (family 19h = 0xf + 0xa): family 25, model 17.
  EXPECT_EQ(cpuid_family(leaf1_eax(0xf, 0x1, 1, 0x1, 0xa)), 25u);
  // Intel (family 6, model 0x8f): the extended family is ignored, even
  // when its bits are set.
  EXPECT_EQ(cpuid_family(leaf1_eax(0x6, 0xf, 8, 0x8, 0x0)), 6u);
  EXPECT_EQ(cpuid_family(leaf1_eax(0x6, 0xf, 8, 0x8, 0xff)), 6u);
  // A base family of 0xf with no extension (Pentium 4) is 15; the largest
  // encodable one is 0xf + 0xff.
  EXPECT_EQ(cpuid_family(leaf1_eax(0xf, 0x2, 9, 0x0, 0x0)), 15u);
  EXPECT_EQ(cpuid_family(leaf1_eax(0xf, 0xf, 0xf, 0xf, 0xff)), 270u);
}

// The bits, from the Intel SDM (vol. 2A, CPUID; vol. 1, 13.3 for XCR0),
// written out here rather than taken from the library.
constexpr uint32_t kFma = 1u << 12, kOsxsave = 1u << 27, kAvx = 1u << 28, kF16c = 1u << 29;
constexpr uint32_t kAvx2 = 1u << 5, kAvx512f = 1u << 16, kAvx512bw = 1u << 30, kAvx512vl = 1u << 31;
constexpr uint32_t kAvx512bf16 = 1u << 5;  // leaf 7 subleaf 1 EAX
constexpr uint64_t kXcr0Ymm = 0x7, kXcr0Zmm = 0xe7;  // x87 SSE AVX, + opmask ZMM_Hi256 Hi16_ZMM

// A Zen 4 / Sapphire Rapids-like CPU under an OS that saves all of its state.
moegrad::runtime::CpuidWords everything() {
  moegrad::runtime::CpuidWords w;
  w.leaf1_ecx = kFma | kOsxsave | kAvx | kF16c;
  w.xcr0 = kXcr0Zmm;
  w.max_leaf = 0xd;
  w.leaf7_max_subleaf = 1;
  w.leaf7_ebx = kAvx2 | kAvx512f | kAvx512bw | kAvx512vl;
  w.leaf7_1_eax = kAvx512bf16;
  return w;
}

struct IsaCase {
  const char* what;
  void (*edit)(moegrad::runtime::CpuidWords&);
  bool avx2, avx512f, avx512bf16;
};

TEST(IsaFeatures, EachPathNeedsItsInstructionsAndTheOsSavedState) {
  using W = moegrad::runtime::CpuidWords;
  const IsaCase cases[] = {
      {"everything", [](W&) {}, true, true, true},
      {"no OSXSAVE (xgetbv not enabled)", [](W& w) { w.leaf1_ecx &= ~kOsxsave; }, false, false, false},
      {"no AVX", [](W& w) { w.leaf1_ecx &= ~kAvx; }, false, false, false},
      {"no FMA", [](W& w) { w.leaf1_ecx &= ~kFma; }, false, false, false},
      {"no F16C", [](W& w) { w.leaf1_ecx &= ~kF16c; }, false, false, false},
      {"no AVX2", [](W& w) { w.leaf7_ebx &= ~kAvx2; }, false, false, false},
      {"no leaf 7", [](W& w) { w.max_leaf = 6; }, false, false, false},
      {"OS saves no YMM state", [](W& w) { w.xcr0 = 0x3; }, false, false, false},
      {"OS saves YMM but not ZMM state", [](W& w) { w.xcr0 = kXcr0Ymm; }, true, false, false},
      {"OS saves ZMM but not the opmasks", [](W& w) { w.xcr0 = kXcr0Zmm & ~uint64_t{0x20}; }, true, false, false},
      {"OS saves the opmasks but not Hi16_ZMM", [](W& w) { w.xcr0 = kXcr0Zmm & ~uint64_t{0x80}; }, true, false,
       false},
      {"OS saves all but ZMM_Hi256", [](W& w) { w.xcr0 = kXcr0Zmm & ~uint64_t{0x40}; }, true, false, false},
      {"OS saves all but SSE state", [](W& w) { w.xcr0 = kXcr0Zmm & ~uint64_t{0x2}; }, false, false, false},
      {"no AVX512F", [](W& w) { w.leaf7_ebx &= ~kAvx512f; }, true, false, false},
      {"no AVX512_BF16", [](W& w) { w.leaf7_1_eax = 0; }, true, true, false},
      {"AVX512_BF16 but no AVX512BW", [](W& w) { w.leaf7_ebx &= ~kAvx512bw; }, true, true, false},
      {"AVX512_BF16 but no AVX512VL", [](W& w) { w.leaf7_ebx &= ~kAvx512vl; }, true, true, false},
      {"AVX512_BF16 bit in a subleaf 1 that does not exist", [](W& w) { w.leaf7_max_subleaf = 0; }, true, true,
       false},
      {"AVX2 only (Haswell)",
       [](W& w) {
         w.xcr0 = kXcr0Ymm;
         w.leaf7_ebx = kAvx2;
         w.leaf7_max_subleaf = 0;
         w.leaf7_1_eax = 0;
       },
       true, false, false},
  };
  for (const IsaCase& c : cases) {
    SCOPED_TRACE(c.what);
    W w = everything();
    c.edit(w);
    const moegrad::runtime::CpuFeatures f = moegrad::runtime::isa_features(w);
    EXPECT_EQ(f.avx2, c.avx2);
    EXPECT_EQ(f.avx512f, c.avx512f);
    EXPECT_EQ(f.avx512bf16, c.avx512bf16);
  }
}

// And on this CPU, what the library detected is what libgcc's own CPUID and
// XGETBV reading says (the AVX2 path also converts f16 with F16C, and each
// path builds on the one before). The fast bf16 mode's tests skip where the
// library finds no AVX512_BF16, so a detection that lost it would turn them
// into skips, not failures. libgcc decodes the features of Intel and AMD
// CPUs only, and reads leaf 7 subleaf 1 without asking subleaf 0 whether it
// exists (the library asks).
TEST(IsaFeatures, DetectedAsLibgccSeesThisCpu) {
  __builtin_cpu_init();
  if (__builtin_cpu_is("intel") == 0 && __builtin_cpu_is("amd") == 0)
    GTEST_SKIP() << "libgcc reads no features on this vendor's CPUs";
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool has_subleaf_1 = __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && a >= 1;
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool avx512f = avx2 && __builtin_cpu_supports("avx512f");
  const bool avx512bf16 = avx512f && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          has_subleaf_1 && __builtin_cpu_supports("avx512bf16");
  const moegrad::runtime::CpuFeatures& f = moegrad::runtime::cpu_features();
  EXPECT_EQ(f.avx2, avx2);
  EXPECT_EQ(f.avx512f, avx512f);
  EXPECT_EQ(f.avx512bf16, avx512bf16);
}

// The reader the next test takes its expected values from: x86 Linux lists
// "cpu family", "model" (a number) and "model name", so a key matched as a
// prefix would answer "cpu" with the family and "model" with the name.
TEST(CpuinfoField, MatchesWholeKeysOnly) {
  using moegrad::runtime::cpuinfo_field;
  const std::string model = cpuinfo_field("model"), name = cpuinfo_field("model name");
  if (cpuinfo_field("cpu family").empty() || model.empty() || name.empty())
    GTEST_SKIP() << "/proc/cpuinfo lacks the x86 keys";
  EXPECT_EQ(cpuinfo_field("cpu"), "");
  EXPECT_EQ(model.find_first_not_of("0123456789"), std::string::npos) << model;
  EXPECT_EQ(moegrad::runtime::cpu_model(), name);
  EXPECT_EQ(cpuinfo_field("no such key"), "");
}

TEST(CpuFeatures, AmdFamilyIsProcCpuinfosOnAmdAndZeroElsewhere) {
  const std::string vendor = moegrad::runtime::cpuinfo_field("vendor_id");
  const std::string family = moegrad::runtime::cpuinfo_field("cpu family");
  if (vendor.empty() || family.empty()) GTEST_SKIP() << "/proc/cpuinfo gives no vendor_id or cpu family";
  // Under an emulator (qemu-user, as scripts/test_cpus.sh runs this test)
  // CPUID describes the emulated CPU and /proc/cpuinfo the host's.
  unsigned a = 0, b = 0, c = 0, d = 0;
  ASSERT_TRUE(__get_cpuid(0, &a, &b, &c, &d));
  char cpuid_vendor[13] = {};
  std::memcpy(cpuid_vendor, &b, 4);
  std::memcpy(cpuid_vendor + 4, &d, 4);
  std::memcpy(cpuid_vendor + 8, &c, 4);
  if (vendor != cpuid_vendor)
    GTEST_SKIP() << "CPUID says " << cpuid_vendor << ", /proc/cpuinfo " << vendor << " (emulated CPU)";
  const unsigned want = vendor == "AuthenticAMD" ? static_cast<unsigned>(std::stoul(family)) : 0u;
  EXPECT_EQ(moegrad::runtime::cpu_features().amd_family, want) << vendor << ", cpu family " << family;
}

}  // namespace
