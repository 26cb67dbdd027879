// The CLI's f16 and bf16 decoders, which the float64 reference reads inputs
// with: values worked out by hand from the formats' definitions, then every
// f16 pattern against the library's own widening (written separately, so two
// independent implementations must agree bit for bit).
#include "float_formats.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

namespace moegrad::cli {
namespace {

TEST(FloatFormatsTest, F16ValuesFromTheDefinition) {
  EXPECT_EQ(f16_bits_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_bits_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_bits_to_f32(0x3555), 0.333251953125f);  // 0x155 / 1024 + 1, times 2^-2
  EXPECT_EQ(f16_bits_to_f32(0x7bff), 65504.0f);         // the largest finite
  EXPECT_EQ(f16_bits_to_f32(0x0400), 0x1p-14f);         // the smallest normal
  EXPECT_EQ(f16_bits_to_f32(0x0001), 0x1p-24f);         // the smallest subnormal
  EXPECT_EQ(f16_bits_to_f32(0x03ff), 1023 * 0x1p-24f);  // the largest subnormal
  EXPECT_EQ(std::bit_cast<uint32_t>(f16_bits_to_f32(0x0000)), 0x00000000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(f16_bits_to_f32(0x8000)), 0x80000000u);  // -0.0
  EXPECT_EQ(f16_bits_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(f16_bits_to_f32(0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(0x7c01)));
}

TEST(FloatFormatsTest, F16AgreesWithTheLibrarysWideningOnEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float ours = f16_bits_to_f32(static_cast<uint16_t>(h));
    const float library = moegrad::f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(library)) {
      EXPECT_TRUE(std::isnan(ours)) << std::hex << h;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(ours), std::bit_cast<uint32_t>(library)) << std::hex << h;
    }
  }
}

TEST(FloatFormatsTest, Bf16IsTheTopHalfOfAnF32) {
  EXPECT_EQ(bf16_bits_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_bits_to_f32(0xc040), -3.0f);
  EXPECT_EQ(bf16_bits_to_f32(0x0001), 0x1p-133f);  // the smallest subnormal
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);  // a tie rounds to even (down)
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);  // a tie rounds to even (up)
}

}  // namespace
}  // namespace moegrad::cli
