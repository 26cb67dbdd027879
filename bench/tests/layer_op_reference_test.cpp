// check_layer_op_against_float64 (layer_op_reference.h) on outputs made by
// plain loops here: small integer inputs, whose sums every format holds
// exactly, pass with no error; an error past the bound in a sampled element,
// a NaN, or a nonzero element of an expert without rows fails; an element
// outside the sample is not looked at. And the words a failure puts in
// the table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "float_formats.h"
#include "layer_op_reference.h"
#include "runner_support.h"

namespace {

using moegrad::bench::BenchOp;
using moegrad::bench::check_layer_op_against_float64;
using moegrad::bench::LayerOpProblem;
using moegrad::bench::LayerOpReferenceCheck;
using moegrad::cli::FloatFormat;

constexpr int64_t kK = 5, kN = 7;
const std::vector<int64_t> kGroups = {3, 0, 4};  // expert 1 has no rows
constexpr int64_t kM = 7, kG = 3;

// Values in [-3, 3] as `format` stores them (exact in each).
std::vector<uint16_t> half_bits(const std::vector<float>& v, FloatFormat format) {
  std::vector<uint16_t> bits;
  for (float f : v)
    bits.push_back(format == FloatFormat::kF16 ? moegrad::cli::f32_to_f16_bits(f) : moegrad::cli::f32_to_bf16_bits(f));
  return bits;
}

struct Case {
  FloatFormat format;
  BenchOp op;
  std::vector<float> x, other;  // other: weight [G, K, N] or grad_y [M, N]
  std::vector<uint16_t> x16, other16;
  std::vector<float> out;  // the exact output
  LayerOpProblem problem;

  Case(FloatFormat f, BenchOp which) : format(f), op(which) {
    const bool forward = op == BenchOp::kForward;
    for (int64_t i = 0; i < kM * kK; ++i) x.push_back(static_cast<float>((i * 5 + 2) % 7 - 3));
    const int64_t others = forward ? kG * kK * kN : kM * kN;
    for (int64_t i = 0; i < others; ++i) other.push_back(static_cast<float>((i * 3 + 1) % 7 - 3));
    std::vector<int64_t> start = {0};
    for (int64_t c : kGroups) start.push_back(start.back() + c);
    if (forward) {
      out.assign(static_cast<size_t>(kM * kN), 0.0f);
      for (int64_t g = 0; g < kG; ++g)
        for (int64_t i = start[g]; i < start[g + 1]; ++i)
          for (int64_t n = 0; n < kN; ++n) {
            double s = 0;
            for (int64_t k = 0; k < kK; ++k) s += double{x[i * kK + k]} * other[(g * kK + k) * kN + n];
            out[i * kN + n] = static_cast<float>(s);
          }
    } else {
      out.assign(static_cast<size_t>(kG * kK * kN), 0.0f);
      for (int64_t g = 0; g < kG; ++g)
        for (int64_t k = 0; k < kK; ++k)
          for (int64_t n = 0; n < kN; ++n) {
            double s = 0;
            for (int64_t i = start[g]; i < start[g + 1]; ++i) s += double{x[i * kK + k]} * other[i * kN + n];
            out[(g * kK + k) * kN + n] = static_cast<float>(s);
          }
    }
    if (format != FloatFormat::kF32) {
      x16 = half_bits(x, format);
      other16 = half_bits(other, format);
    }
    const bool wide = format == FloatFormat::kF32;
    problem.op = op;
    problem.format = format;
    problem.x = wide ? static_cast<const void*>(x.data()) : x16.data();
    const void* o = wide ? static_cast<const void*>(other.data()) : other16.data();
    problem.weight = forward ? o : nullptr;
    problem.grad_y = forward ? nullptr : o;
    problem.group_list = kGroups.data();
    problem.experts = kG;
    problem.k = kK;
    problem.n = kN;
    problem.m = kM;
  }

  std::string name() const {
    return std::string(moegrad::cli::format_name(format)) + (op == BenchOp::kForward ? " forward" : " weight-grad");
  }
};

std::vector<Case> every_case() {
  std::vector<Case> cases;
  cases.reserve(6);  // a Case points into its own vectors
  for (FloatFormat f : {FloatFormat::kF32, FloatFormat::kF16, FloatFormat::kBF16})
    for (BenchOp op : {BenchOp::kForward, BenchOp::kWeightGrad}) cases.emplace_back(f, op);
  return cases;
}

TEST(LayerOpReference, ExactOutputsPassWithNoError) {
  for (const Case& c : every_case()) {
    const LayerOpReferenceCheck r = check_layer_op_against_float64(c.problem, c.out.data(), 100);
    EXPECT_TRUE(r.within_bound) << c.name();
    EXPECT_EQ(r.max_error_over_bound, 0.0) << c.name();
    // Every row is sampled: the forward's 7 rows, or the weight grad's up
    // to 15 (g, k) rows (some twice), N columns each.
    EXPECT_EQ(r.elements, (c.op == BenchOp::kForward ? kM : kG * kK) * kN) << c.name();
  }
}

// An element of the forward's last row (expert 2) with nonzero terms: K =
// 5 roundings of sums up to sum |terms|, so the bound is 5 * 2^-24 *
// sum |terms| (+ 5 * 2^-150).
TEST(LayerOpReference, AnErrorPastTheBoundFailsAndOneWithinPasses) {
  Case c(FloatFormat::kF32, BenchOp::kForward);
  const int64_t i = kM - 1, g = 2;
  auto abs_sum_at = [&](int64_t n) {
    double a = 0;
    for (int64_t k = 0; k < kK; ++k) a += std::fabs(double{c.x[i * kK + k]} * c.other[(g * kK + k) * kN + n]);
    return a;
  };
  int64_t n = 0;
  while (n + 1 < kN && abs_sum_at(n) == 0) ++n;
  const double abs_sum = abs_sum_at(n);
  ASSERT_GT(abs_sum, 0);
  const double bound = kK * (std::ldexp(abs_sum, -24) + std::ldexp(1.0, -150));
  std::vector<float> out = c.out;
  float& e = out[i * kN + n];
  const float exact = e;
  e = static_cast<float>(exact + 0.5 * bound);
  if (e == exact) e = std::nextafter(exact, 1e9f);  // keep an error, within the bound
  const LayerOpReferenceCheck within = check_layer_op_against_float64(c.problem, out.data(), 2);
  EXPECT_TRUE(within.within_bound) << within.max_error_over_bound;
  EXPECT_DOUBLE_EQ(within.max_error_over_bound, std::fabs(double{e} - exact) / bound);
  EXPECT_LE(within.max_error_over_bound, 1.0);
  e = static_cast<float>(exact + 4 * bound);
  const LayerOpReferenceCheck past = check_layer_op_against_float64(c.problem, out.data(), 2);
  EXPECT_FALSE(past.within_bound);
  EXPECT_DOUBLE_EQ(past.max_error_over_bound, std::fabs(double{e} - exact) / bound);  // about 4, not inf
  EXPECT_GT(past.max_error_over_bound, 1.0);
}

TEST(LayerOpReference, ANanFails) {
  for (Case& c : every_case()) {
    c.out[c.out.size() - 1] = std::numeric_limits<float>::quiet_NaN();  // the last row is sampled
    EXPECT_FALSE(check_layer_op_against_float64(c.problem, c.out.data(), 2).within_bound) << c.name();
  }
}

// Sampled (g, k) rows spread g and k together: with 3 samples over 3
// experts, expert 1 is sampled at k = 2, whose sum over no rows is +0.0
// exactly.
TEST(LayerOpReference, AnExpertWithoutRowsMustHoldZero) {
  Case c(FloatFormat::kF32, BenchOp::kWeightGrad);
  c.out[(1 * kK + 2) * kN] = 1e-30f;
  EXPECT_FALSE(check_layer_op_against_float64(c.problem, c.out.data(), 3).within_bound);
}

// With 2 samples the forward checks rows 0 and M - 1 only.
TEST(LayerOpReference, RowsOutsideTheSampleAreNotRead) {
  Case c(FloatFormat::kF32, BenchOp::kForward);
  c.out[3 * kN] = std::numeric_limits<float>::quiet_NaN();
  const LayerOpReferenceCheck r = check_layer_op_against_float64(c.problem, c.out.data(), 2);
  EXPECT_TRUE(r.within_bound);
  EXPECT_EQ(r.elements, 2 * kN);
}

// The check column's words: a pass keeps the row, a failure marks it (so
// the bench counts it, exits 1 and leaves its times null) and explains.
TEST(LayerOpReference, AFailedCheckMarksTheRow) {
  moegrad::bench::Row pass, fail;
  EXPECT_EQ(moegrad::bench::float64_check(true, 0.25, "y", &pass), "");
  EXPECT_EQ(pass.check, "ref, f64 0.25");
  EXPECT_FALSE(pass.check_failed);
  EXPECT_EQ(moegrad::bench::float64_check(false, 3.5, "y", &fail),
            "y exceeds the float64 reference's error bound (largest error 3.5 times the bound)");
  EXPECT_EQ(fail.check, "ref, FAIL f64 3.5");
  EXPECT_TRUE(fail.check_failed);
}

}  // namespace
