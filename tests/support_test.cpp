// Self-tests of the test support: the independent f16/bf16 conversions, the
// routing generator and the SPEC §3 decoding the references rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "float_formats.h"
#include "host_tensor.h"
#include "routing.h"

namespace mgt {
namespace {

TEST(FloatFormats, F16KnownValues) {
  EXPECT_EQ(f16_bits_to_float(0x3C00), 1.0f);
  EXPECT_EQ(f16_bits_to_float(0xC000), -2.0f);
  EXPECT_EQ(f16_bits_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_bits_to_float(0x0400), std::ldexp(1.0f, -14));    // smallest normal
  EXPECT_EQ(f16_bits_to_float(0x0001), std::ldexp(1.0f, -24));    // smallest denormal
  EXPECT_EQ(f16_bits_to_float(0x03FF), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(float_bits(f16_bits_to_float(0x8000)), 0x80000000u);  // -0
  EXPECT_TRUE(std::isinf(f16_bits_to_float(0x7C00)));
  EXPECT_TRUE(std::isnan(f16_bits_to_float(0x7E00)));
}

TEST(FloatFormats, BF16KnownValues) {
  EXPECT_EQ(bf16_bits_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(0xC0A0), -5.0f);
  EXPECT_EQ(bf16_bits_to_float(0x0001), std::ldexp(1.0f, -133));  // denormal
  EXPECT_EQ(bf16_bits_to_float(0x7F7F), std::ldexp(255.0f, 120));
  EXPECT_TRUE(std::isinf(bf16_bits_to_float(0xFF80)));
}

TEST(FloatFormats, RoundTripEveryBitPattern) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float f = f16_bits_to_float(h);
    if (!std::isnan(f)) {
      ASSERT_EQ(float_to_f16_bits(f), h) << std::hex << b;
    }
    const float g = bf16_bits_to_float(h);
    if (!std::isnan(g)) {
      ASSERT_EQ(float_to_bf16_bits(g), h) << std::hex << b;
      ASSERT_EQ(float_bits(g), b << 16) << std::hex << b;  // bf16 is the top half of an f32
    }
  }
}

TEST(FloatFormats, NarrowingRoundsToNearestEven) {
  EXPECT_EQ(float_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
}

TEST(HostTensor, StridesAndSentinel) {
  HostTensor t(kDLF32, {3, 4}, {6, 1});
  EXPECT_EQ(t.offset({2, 3}), 15);
  EXPECT_EQ(t.offset_of_linear(11), 15);
  EXPECT_TRUE(t.all_sentinel());
  t.set_float(t.offset({1, 2}), 2.5f);
  EXPECT_FALSE(t.all_sentinel());
  EXPECT_TRUE(t.sentinel_outside_view());
  t.set_bits(4, 0);  // padding element between rows
  EXPECT_FALSE(t.sentinel_outside_view());
  EXPECT_EQ(t.view().strides[0], 6);
  EXPECT_EQ(HostTensor(kDLF32, {3, 4}).view().strides, nullptr);
}

void check_routing(const RoutingSpec& spec) {
  const Routing r = make_routing(spec);
  SCOPED_TRACE(::testing::Message() << "batch=" << spec.batch << " top_k=" << spec.top_k << " G=" << spec.experts
                                    << " type=" << spec.row_idx_type << " keep=" << spec.keep_ratio);
  int64_t sum = 0;
  for (auto c : r.counts) {
    ASSERT_GE(c, 0);
    sum += c;
  }
  ASSERT_EQ(sum, r.M);
  ASSERT_LE(r.M, spec.batch * spec.top_k);
  for (int64_t g : spec.empty_experts) EXPECT_EQ(r.counts[static_cast<size_t>(g)], 0);
  if (spec.row_idx_type == 0) {
    ASSERT_EQ(r.L(), r.M + spec.extra);
  } else {
    ASSERT_EQ(r.L(), spec.batch * spec.top_k - spec.extra);
    std::set<int64_t> seen;
    for (auto e : r.idx) {
      if (e != -1) {
        ASSERT_TRUE(seen.insert(e).second) << "row " << e << " claimed twice";
      }
    }
  }
  for (auto v : r.idx) {
    ASSERT_GE(v, -1);
    ASSERT_LT(v, spec.row_idx_type == 0 ? spec.batch * spec.top_k : r.M);
  }
  // The SPEC §3 decoding agrees with the generator's ground truth.
  EXPECT_EQ(owners_from_index(r.idx, spec.row_idx_type, r.M, spec.top_k), r.owner);
}

TEST(Routing, GeneratorInvariantsAndDecoding) {
  for (int32_t type : {0, 1})
    for (double keep : {1.0, 0.8, 0.3, 0.0})
      for (bool keep_row : {false, true})
        for (int64_t extra : {0, 5}) {
          RoutingSpec s;
          s.batch = 37;
          s.top_k = 3;
          s.experts = 7;
          s.row_idx_type = type;
          s.keep_ratio = keep;
          s.dropped_keep_row = keep_row;
          s.extra = extra;
          s.empty_experts = {2};
          s.seed = 11;
          check_routing(s);
        }
  RoutingSpec repeats;  // top_k > experts: a token meets an expert twice
  repeats.batch = 9;
  repeats.top_k = 5;
  repeats.experts = 2;
  check_routing(repeats);
}

TEST(Routing, DroppedSlotsAndPaddingAppear) {
  RoutingSpec s;
  s.batch = 64;
  s.top_k = 2;
  s.experts = 4;
  s.keep_ratio = 0.8;
  s.dropped_keep_row = true;
  const Routing r0 = make_routing(s);
  EXPECT_EQ(r0.M, 128);
  EXPECT_GT(std::count(r0.idx.begin(), r0.idx.end(), -1), 0) << "type 0 needs padding rows";
  s.row_idx_type = 1;
  s.dropped_keep_row = false;
  const Routing r1 = make_routing(s);
  EXPECT_LT(r1.M, 128);
  EXPECT_GT(std::count(r1.idx.begin(), r1.idx.end(), -1), 0) << "type 1 needs dropped slots";
}

}  // namespace
}  // namespace mgt
