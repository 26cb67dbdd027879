// runtime/cpu_features: the CPU family decoded from CPUID leaf 1, checked
// against the families the vendors' manuals and /proc/cpuinfo give, and the
// AMD family the library records (a prefetch in driver/grad_x_driver.cpp
// depends on it).
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
