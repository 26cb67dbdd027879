// SPEC §5's fixed order, checked independently: the test computes
//   c_i[k] = fma chain over n = 0..N-1 from +0.0f,
//   grad_x[b,k] = ((0 + c_i1[k]) + c_i2[k]) + ...   (ascending i)
// itself with std::fma and requires the library's bits on every ISA, on
// random cases with a wide exponent range, denormal products, and hand-made
// cases whose expected value is worked out here.
#include <moegrad/moegrad.h>

#include <gtest/gtest.h>

#include <xmmintrin.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "float_formats.h"
#include "problem.h"
#include "reference.h"
#include "runner.h"

namespace mgt {
namespace {

class Order : public IsaTest {
 protected:
  void expect_contract_bits(const Problem& p, int32_t threads = 0) {
    const auto want = reference_contract_order(p);
    const auto got = compute(p, options(threads));
    EXPECT_TRUE(bitwise_equal(got, want, p.K, describe(p, options(threads)) + " vs SPEC §5 order"));
  }
};

struct Shape {
  int64_t batch, top_k, G, K, N;
};

TEST_P(Order, RandomWideExponentCasesMatchBitwise) {
  const Shape shapes[] = {
      {9, 1, 2, 1, 1},    {13, 2, 3, 7, 3},    {20, 3, 4, 33, 16},  {17, 2, 3, 5, 17},
      {24, 4, 5, 130, 64}, {11, 2, 2, 16, 129}, {30, 3, 6, 45, 300}, {6, 2, 3, 257, 31},
  };
  uint64_t seed = 1;
  for (const Shape& sh : shapes)
    for (int32_t type : {0, 1}) {
      ProblemSpec s =
          make_spec({.batch = sh.batch, .top_k = sh.top_k, .experts = sh.G, .K = sh.K, .N = sh.N}, type, 0.85, ++seed);
      s.routing.dropped_keep_row = true;
      s.dtype = DType::kF32;
      s.values = Values::kWideExponent;
      s.value_seed = seed * 7;
      expect_contract_bits(Problem(s), type == 0 ? 1 : 3);
    }
}

// An expert whose rows are in ascending token order (as MoeInitRouting
// leaves them) gives each item its tokens' rows by binary search, any other
// expert by a scan. Every thread count (token chunks that cut the experts'
// rows in other places) gives SPEC §5's bits, with capacity padding before
// and after an expert's rows or among them, a descending expert and an
// empty one.
TEST_P(Order, RowsOfSortedAndUnsortedExpertsMatchBitwise) {
  for (int32_t type : {0, 1})
    for (bool padding_at_ends : {true, false}) {
      ProblemSpec s = make_spec({.batch = 61, .top_k = 3, .experts = 7, .K = 40, .N = 33}, type, 0.8, 11 + type);
      s.routing.dropped_keep_row = true;
      s.routing.shuffle_within_expert = false;
      s.routing.padding_at_ends = padding_at_ends;
      s.routing.descending_experts = {2};
      s.routing.empty_experts = {5};
      s.dtype = DType::kF32;
      s.values = Values::kWideExponent;
      s.value_seed = 5 + static_cast<uint64_t>(type);
      const Problem p(s);
      for (int32_t threads : {1, 2, 3, 5, 8, 16}) expect_contract_bits(p, threads);
    }
}

// f16 and bf16 are widened exactly, so the same f32 order applies to them.
TEST_P(Order, HalfPrecisionInputsFollowTheSameOrder) {
  for (DType dtype : {DType::kF16, DType::kBF16})
    for (int32_t type : {0, 1}) {
      ProblemSpec s = make_spec({.batch = 25, .top_k = 3, .experts = 4, .K = 41, .N = 203}, type, 0.9, 31);
      s.dtype = dtype;
      s.values = Values::kWideExponent;
      s.value_seed = 4;
      expect_contract_bits(Problem(s), 2);
    }
}

// Values whose f32/bf16 products fall in the f32 denormal range (f16:
// denormal inputs, which widen to f32 normals).
ProblemSpec tiny_spec(DType dtype) {
  ProblemSpec s = make_spec({.batch = 12, .top_k = 2, .experts = 3, .K = 19, .N = 37}, 0, 1.0, 8);
  s.dtype = dtype;
  s.values = Values::kTiny;
  s.value_seed = 12;
  return s;
}

// No FTZ/DAZ.
TEST_P(Order, DenormalsAreNotFlushed) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const Problem p(tiny_spec(dtype));
    const auto want = reference_contract_order(p);
    if (dtype != DType::kF16) {
      // Precondition: the exact result really has nonzero denormals.
      int denormals = 0;
      for (float v : want) denormals += std::fpclassify(v) == FP_SUBNORMAL;
      ASSERT_GT(denormals, 0) << "the case must produce denormal outputs";
    }
    expect_contract_bits(p);
  }
}

// A caller's thread with flush-to-zero, denormals-are-zero and rounding
// toward zero (what torch.set_flush_denormal or a framework may leave in
// MXCSR; new threads inherit it, and the calling thread is worker 0):
// the same SPEC §5 bits, denormals included, and the caller's MXCSR as it
// was afterwards. The reference is computed, and the bits compared, under
// the default MXCSR.
TEST_P(Order, ACallerThatFlushesAndTruncatesChangesNoBit) {
  constexpr unsigned kFtz = 0x8000u, kDaz = 0x0040u, kTowardZero = 0x6000u;
  const unsigned saved = _mm_getcsr();
  const unsigned hostile = saved | kFtz | kDaz | kTowardZero;
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (int32_t threads : {1, 3}) {
      const Problem p(tiny_spec(dtype));
      const auto want = reference_contract_order(p);
      _mm_setcsr(hostile);  // before compute() makes the context and its threads
      const auto got = compute(p, options(threads));
      const unsigned after = _mm_getcsr();
      _mm_setcsr(saved);
      constexpr unsigned kControl = ~0x3fu;  // not the sticky exception flags the test's own code may raise
      EXPECT_EQ(after & kControl, hostile & kControl) << "the caller's MXCSR controls are restored";
      EXPECT_TRUE(bitwise_equal(got, want, p.K, describe(p, options(threads)) + ", caller with FTZ, DAZ, RZ"));
    }
}

// README: MXCSR is restored after a run, exception flags included. The run
// rounds, and its denormal products underflow, on every worker, the caller's
// thread (worker 0) included; planning (whose cost model, with more than one
// thread, rounds doubles) runs on the caller's thread. Afterwards the caller
// holds exactly the flags it had before either.
TEST_P(Order, PlanningAndARunLeaveTheCallersExceptionFlagsAsTheyWere) {
  constexpr unsigned kFlags = 0x3fu, kDivideByZero = 0x04u;
  for (int32_t threads : {1, 3}) {
    const Problem p(tiny_spec(DType::kF32));
    HostTensor grad_x = p.make_grad_x();
    Call call(p, grad_x);
    const ContextPtr ctx = make_context(GetParam(), threads);
    size_t bytes = 0;
    moegrad_executor* raw = nullptr;
    const unsigned saved = _mm_getcsr();
    _mm_setcsr((saved & ~kFlags) | kDivideByZero);
    const moegrad_status planned = moegrad_grad_x_get_workspace_size(&call.args, ctx.get(), &bytes, &raw);
    const unsigned after_planning = _mm_getcsr();
    _mm_setcsr(saved);
    ASSERT_EQ(planned, MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
    const ExecutorPtr executor(raw);
    EXPECT_EQ(after_planning & kFlags, kDivideByZero) << "threads=" << threads << ": after planning, MXCSR flags 0x"
                                                      << std::hex << (after_planning & kFlags);
    std::vector<std::byte> workspace(bytes);
    _mm_setcsr((saved & ~kFlags) | kDivideByZero);
    const moegrad_status status = moegrad_grad_x(workspace.data(), bytes, executor.get(), ctx.get());
    const unsigned after = _mm_getcsr();
    _mm_setcsr(saved);
    ASSERT_EQ(status, MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
    EXPECT_EQ(after & kFlags, kDivideByZero) << "threads=" << threads << ": MXCSR flags 0x" << std::hex
                                             << (after & kFlags);
  }
}

// Hand-made cases: K = 1, N and the rows set by hand, weight all ones
// unless stated. Builds a type-1 routing with the given positions -> rows.
Problem hand_problem(int64_t batch, int64_t top_k, std::vector<int64_t> row_of_position, int64_t N) {
  ProblemSpec s = make_spec({.batch = batch, .top_k = top_k, .experts = 1, .K = 1, .N = N}, 1);
  s.dtype = DType::kF32;
  s.values = Values::kSmallInt;
  Problem p(s);
  // Replace the generated routing: one expert owning all rows.
  for (size_t q = 0; q < row_of_position.size(); ++q)
    p.idx.set_index(static_cast<int64_t>(q), row_of_position[q]);
  for (int64_t n = 0; n < N; ++n) p.weight.set_float(p.weight.offset({0, 0, n}), 1.0f);
  return p;
}

// Rows are added in ascending expanded-row order, not in slot order:
// token 0 owns rows 0, 1, 2 (claimed by positions 2, 1, 0) holding
// 1, 2^-24, 2^-24. Ascending rows: (0 + 1) + 2^-24 rounds to 1 (tie to
// even), + 2^-24 again 1. Slot order would give 2^-23 + 1 = 1 + 2^-23.
TEST_P(Order, RowsAreSummedInAscendingExpandedOrder) {
  Problem p = hand_problem(1, 3, {2, 1, 0}, 1);
  const float tiny = std::ldexp(1.0f, -24);
  p.grad_y.set_float(p.grad_y.offset({0, 0}), 1.0f);
  p.grad_y.set_float(p.grad_y.offset({1, 0}), tiny);
  p.grad_y.set_float(p.grad_y.offset({2, 0}), tiny);
  const auto got = compute(p, options());
  EXPECT_EQ(float_bits(got.at(0)), float_bits(1.0f)) << describe(p, options()) << ": got " << got.at(0);
}

// The n-chain runs upwards: grad_y row [1, 2^-24, 2^-24] gives 1, the
// reverse order would give 1 + 2^-23.
TEST_P(Order, ReductionOverNRunsAscending) {
  Problem p = hand_problem(1, 1, {0}, 3);
  const float tiny = std::ldexp(1.0f, -24);
  p.grad_y.set_float(p.grad_y.offset({0, 0}), 1.0f);
  p.grad_y.set_float(p.grad_y.offset({0, 1}), tiny);
  p.grad_y.set_float(p.grad_y.offset({0, 2}), tiny);
  const auto got = compute(p, options());
  EXPECT_EQ(float_bits(got.at(0)), float_bits(1.0f)) << describe(p, options()) << ": got " << got.at(0);
}

// Each step is one fused multiply-add: with a = 1 + 2^-12, the chain
// fma(a, a, fma(1, -1, 0)) is exactly 2^-11 + 2^-24; a rounded product
// a*a = 1 + 2^-11 would give 2^-11.
TEST_P(Order, EachStepIsAFusedMultiplyAdd) {
  Problem p = hand_problem(1, 1, {0}, 2);
  const float a = 1.0f + std::ldexp(1.0f, -12);
  p.grad_y.set_float(p.grad_y.offset({0, 0}), 1.0f);
  p.weight.set_float(p.weight.offset({0, 0, 0}), -1.0f);
  p.grad_y.set_float(p.grad_y.offset({0, 1}), a);
  p.weight.set_float(p.weight.offset({0, 0, 1}), a);
  const float want = std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24);
  const auto got = compute(p, options());
  EXPECT_EQ(float_bits(got.at(0)), float_bits(want)) << describe(p, options()) << ": got " << got.at(0);
}

// A row whose chain ends in -0.0 (a negative product that underflows to
// zero) still gives +0.0: the token sum starts at +0.0 ("0 + c_i1").
TEST_P(Order, NegativeZeroRowGivesPositiveZero) {
  Problem p = hand_problem(2, 2, {0, 1, -1, -1}, 1);
  const float small = std::ldexp(1.0f, -80);
  p.grad_y.set_float(p.grad_y.offset({0, 0}), -small);
  p.grad_y.set_float(p.grad_y.offset({1, 0}), -small);
  p.weight.set_float(p.weight.offset({0, 0, 0}), small);
  ASSERT_EQ(float_bits(std::fma(-small, small, 0.0f)), 0x80000000u) << "precondition: the chain gives -0";
  const auto got = compute(p, options());
  EXPECT_EQ(float_bits(got.at(0)), 0u) << describe(p, options()) << ": got " << got.at(0);
  EXPECT_EQ(float_bits(got.at(1)), 0u) << "token 1 has no rows";
}

// README, "NaN": NaNs of both signs and random payloads (quiet and
// signalling) meet in products and in a token's sum, and invalid
// operations (inf * 0, inf - inf) occur; the reference stores each NaN as
// 0x7fc00000, and every engine, thread count, dtype and grad_x layout
// (the strided ones take the driver's own loops) must give its bits.
TEST_P(Order, EveryNaNIsStoredAsTheCanonicalNaN) {
  std::vector<Layout> layouts(3);
  layouts[1].grad_x_row_pad = 3;
  layouts[2].grad_x_column_major = true;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
    for (const Layout& layout : layouts) {
      ProblemSpec s = make_spec({.batch = 23, .top_k = 2, .experts = 4, .K = 37, .N = 13}, 0, 0.9, 5);
      s.dtype = dtype;
      s.values = Values::kNonFinite;
      s.value_seed = 9;
      const Problem p(s, layout);
      const Floats want = reference_contract_order(p);
      size_t nans = 0;
      for (float v : want) nans += std::isnan(v) ? 1 : 0;
      ASSERT_GT(nans, want.size() / 8) << p.describe() << ": too few NaN elements to test";
      ASSERT_LT(nans, want.size() / 8 * 7) << p.describe() << ": too few other elements to test";
      for (const char* engine : {"packed", "rowvec"}) {
        ScopedEnv env("MOEGRAD_ENGINE", engine);
        for (int32_t threads : {1, 2, 3})
          EXPECT_TRUE(bitwise_equal(compute(p, options(threads)), want, p.K,
                                    describe(p, options(threads)) + " engine=" + engine + " " + layout.describe()));
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, Order, ::testing::ValuesIn(explicit_isas()), isa_param_name);

}  // namespace
}  // namespace mgt
