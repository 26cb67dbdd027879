// `moegrad run`'s float64 check on a problem worked out here with integer
// arithmetic: the exact grad_x passes in every input format, an error above
// the SPEC 5 bound, a NaN or an error on either end of the sample fails,
// and an error of one ulp (inside the bound) passes.
#include "reference_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "float_formats.h"

namespace moegrad::cli {
namespace {

// batch 5, top_k 2, G 2, K 3, N 4: expert 0 owns every token's slot 0
// (positions 0, 2, .., 8), expert 1 every slot 1; small integers, exact in
// f16 and bf16 too.
constexpr int64_t kBatch = 5, kTopK = 2, kG = 2, kK = 3, kN = 4, kM = kBatch * kTopK;

int64_t gy_value(int64_t row, int64_t n) { return (row * 3 + n) % 5 - 2; }
int64_t w_value(int64_t g, int64_t k, int64_t n) { return (g * 7 + k * 3 + n) % 4 - 1; }

struct HandProblem {
  explicit HandProblem(FloatFormat format) : format(format) {
    for (int64_t p = 0; p < kM; p += 2) expanded_row_idx.push_back(p);
    for (int64_t p = 1; p < kM; p += 2) expanded_row_idx.push_back(p);
    std::vector<float> gy, w;
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t n = 0; n < kN; ++n) gy.push_back(static_cast<float>(gy_value(i, n)));
    for (int64_t g = 0; g < kG; ++g)
      for (int64_t k = 0; k < kK; ++k)
        for (int64_t n = 0; n < kN; ++n) w.push_back(static_cast<float>(w_value(g, k, n)));
    encode(gy, &gy_f32, &gy_half);
    encode(w, &w_f32, &w_half);
    // grad_x[b][k] = sum over b's rows i (expert g = i / 5) of gy[i] . w[g][k]
    exact.assign(kBatch * kK, 0.0f);
    for (int64_t i = 0; i < kM; ++i) {
      const int64_t b = expanded_row_idx[i] / kTopK, g = i / (kM / kG);
      for (int64_t k = 0; k < kK; ++k) {
        int64_t dot = 0;
        for (int64_t n = 0; n < kN; ++n) dot += gy_value(i, n) * w_value(g, k, n);
        exact[b * kK + k] += static_cast<float>(dot);
      }
    }
  }

  void encode(const std::vector<float>& v, std::vector<float>* f32, std::vector<uint16_t>* half) const {
    *f32 = v;
    for (float x : v) half->push_back(format == FloatFormat::kF16 ? f32_to_f16_bits(x) : f32_to_bf16_bits(x));
  }

  ReferenceProblem problem() const {
    const bool f32 = format == FloatFormat::kF32;
    return {f32 ? static_cast<const void*>(gy_f32.data()) : gy_half.data(),
            f32 ? static_cast<const void*>(w_f32.data()) : w_half.data(),
            format,
            expanded_row_idx.data(),
            group_list.data(),
            kBatch,
            kTopK,
            kG,
            kK,
            kN,
            kM};
  }

  FloatFormat format;
  std::vector<int64_t> expanded_row_idx, group_list{kM / kG, kM / kG};
  std::vector<float> gy_f32, w_f32, exact;
  std::vector<uint16_t> gy_half, w_half;
};

class ReferenceCheckTest : public ::testing::TestWithParam<FloatFormat> {};

TEST_P(ReferenceCheckTest, TheExactResultPasses) {
  const HandProblem h(GetParam());
  const ReferenceCheck r = check_against_float64(h.problem(), h.exact.data(), 16);
  EXPECT_TRUE(r.within_bound);
  EXPECT_EQ(r.tokens, kBatch);
  EXPECT_EQ(r.max_abs_error, 0.0);
  EXPECT_EQ(r.max_error_over_bound, 0.0);
}

TEST_P(ReferenceCheckTest, AnErrorAboveTheBoundOrANanFails) {
  const HandProblem h(GetParam());
  std::vector<float> got = h.exact;
  got[4 * kK + 1] += 1.0f;  // the last token
  ReferenceCheck r = check_against_float64(h.problem(), got.data(), 16);
  EXPECT_FALSE(r.within_bound);
  EXPECT_EQ(r.max_abs_error, 1.0);
  EXPECT_GT(r.max_error_over_bound, 1.0);
  EXPECT_TRUE(std::isfinite(r.max_error_over_bound));  // how far past the bound, not just "past"

  got = h.exact;
  got[0] = std::numeric_limits<float>::quiet_NaN();
  r = check_against_float64(h.problem(), got.data(), 16);
  EXPECT_FALSE(r.within_bound);
  EXPECT_EQ(r.max_abs_error, std::numeric_limits<double>::infinity());
  EXPECT_EQ(r.max_error_over_bound, std::numeric_limits<double>::infinity());
}

TEST_P(ReferenceCheckTest, AnErrorOfOneUlpIsInsideTheBound) {
  const HandProblem h(GetParam());
  std::vector<float> got = h.exact;
  size_t at = 0;
  while (got[at] == 0.0f) ++at;  // a nonzero sum: its ulp is within (N + top_k) 2^-24 of its terms
  got[at] = std::nextafter(got[at], std::numeric_limits<float>::infinity());
  const ReferenceCheck r = check_against_float64(h.problem(), got.data(), 16);
  EXPECT_TRUE(r.within_bound);
  EXPECT_GT(r.max_abs_error, 0.0);
  EXPECT_GT(r.max_error_over_bound, 0.0);
  EXPECT_LE(r.max_error_over_bound, 1.0);
}

// Two tokens of five: the first and the last; the middle one is not read.
TEST_P(ReferenceCheckTest, TheSampleHoldsTheFirstAndLastTokens) {
  const HandProblem h(GetParam());
  for (int64_t token : {0, 2, 4}) {
    std::vector<float> got = h.exact;
    got[token * kK + 2] += 1.0f;
    const ReferenceCheck r = check_against_float64(h.problem(), got.data(), 2);
    EXPECT_EQ(r.tokens, 2);
    EXPECT_EQ(r.within_bound, token == 2) << "token " << token;
  }
}

// One product of 2^-80 and 2^-80: exactly 2^-160, which f32 rounds to 0
// (half its smallest subnormal is 2^-150). Correct rounding errs by up to
// 2^-150 there, however small the terms: 0 passes, while 2^-148, an error
// of about four times that, fails. f16 cannot hold 2^-80; bf16 can.
TEST(ReferenceCheck, ARoundingToASubnormalMayErrBy2ToTheMinus150) {
  for (const FloatFormat format : {FloatFormat::kF32, FloatFormat::kBF16}) {
    const float tiny = std::ldexp(1.0f, -80);
    const uint16_t tiny_bf16 = f32_to_bf16_bits(tiny);
    const void* data = format == FloatFormat::kF32 ? static_cast<const void*>(&tiny) : &tiny_bf16;
    const int64_t row_idx[1] = {0}, group_list[1] = {1};
    const ReferenceProblem p{data, data, format, row_idx, group_list, 1, 1, 1, 1, 1, 1};
    const float zero = 0.0f;
    ReferenceCheck r = check_against_float64(p, &zero, 16);
    EXPECT_TRUE(r.within_bound) << format_name(format);
    EXPECT_EQ(r.max_abs_error, std::ldexp(1.0, -160)) << format_name(format);
    const float far = std::ldexp(1.0f, -148);
    r = check_against_float64(p, &far, 16);
    EXPECT_FALSE(r.within_bound) << format_name(format);
  }
}

INSTANTIATE_TEST_SUITE_P(Format, ReferenceCheckTest,
                         ::testing::Values(FloatFormat::kF32, FloatFormat::kF16, FloatFormat::kBF16),
                         [](const auto& info) { return std::string(format_name(info.param)); });

}  // namespace
}  // namespace moegrad::cli
