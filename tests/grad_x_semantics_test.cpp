// What grad-x computes (SPEC §1-§3): every white-box case of the seed
// (§4.2.1) in f32/f16/bf16 and both row_idx_types against an independent
// float64 reference with the SPEC §5 bound, exact results for small-integer
// inputs, index dtypes and group-list forms, -1 handling, M = 0, tokens
// without rows, and the large-token case on the fastest ISA.
#include <moegrad/moegrad.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "problem.h"
#include "reference.h"
#include "runner.h"

namespace mgt {
namespace {

struct WhiteBoxCase {
  const char* name;
  int64_t batch, K, N, top_k, G;
  double ratio;  // fraction of routing slots kept
  std::vector<int64_t> empty_experts;
};

// Seed §4.2.1. "M=1" uses two experts with expert 0 empty, so that it is not
// a copy of the single-token case; the rowIdxType and dtype rows of the table
// are the test parameters.
const std::vector<WhiteBoxCase>& white_box_cases() {
  static const std::vector<WhiteBoxCase> cases = {
      {"SingleTokenSingleExpert", 1, 128, 256, 1, 1, 1.0, {}},
      {"SingleTokenThreeExperts", 1, 128, 256, 3, 3, 1.0, {}},
      {"ManyTokensOneExpert", 128, 128, 256, 1, 1, 1.0, {}},
      {"ManyTokensManyExperts", 128, 128, 256, 3, 10, 0.8, {}},
      {"EmptyExpert", 10, 128, 256, 2, 4, 0.5, {1}},
      {"TailSizes", 10, 128 + 50, 256 + 30, 3, 4, 1.0, {}},
      {"MIsOne", 1, 128, 256, 1, 2, 1.0, {0}},
      {"NIsOne", 128, 128, 1, 3, 4, 1.0, {}},
      {"KIsOne", 128, 1, 256, 3, 4, 1.0, {}},
  };
  return cases;
}

const DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

// A dropped slot is a padding row (-1) for type 0, and a dropped slot (-1)
// with its row removed for type 1; type 0 also gets ignored tail entries
// (L > M) and type 1 a short index (L < batch*top_k) when slots are dropped.
ProblemSpec white_box_spec(const WhiteBoxCase& c, DType dtype, int32_t row_idx_type, Values values) {
  ProblemSpec s = make_spec({.batch = c.batch, .top_k = c.top_k, .experts = c.G, .K = c.K, .N = c.N}, row_idx_type,
                            c.ratio, 1000 + static_cast<uint64_t>(c.batch * 31 + c.K * 7 + c.N));
  s.routing.empty_experts = c.empty_experts;
  if (c.ratio < 1.0) {
    s.routing.dropped_keep_row = row_idx_type == 0;
    s.routing.extra = row_idx_type == 0 ? 5 : c.batch * c.top_k / 8;
  }
  s.dtype = dtype;
  s.idx_dtype = row_idx_type == 0 ? IndexDType::kI64 : IndexDType::kI32;
  s.values = values;
  s.value_seed = 77 + static_cast<uint64_t>(dtype);
  return s;
}

// One test per (case, ISA); each covers f32/f16/bf16 and both row_idx_types
// (the failure message names the dtype and type).
using WhiteBoxParam = std::tuple<size_t, moegrad_isa>;

class WhiteBox : public ::testing::TestWithParam<WhiteBoxParam> {
 protected:
  void SetUp() override { MGT_SKIP_UNLESS_AVAILABLE(std::get<1>(GetParam())); }
  RunOptions options() const { return {.isa = std::get<1>(GetParam())}; }
  // Runs the case for every dtype and row_idx_type with values v; check(p, grad_x).
  template <class Check>
  void for_each_variant(Values v, Check check) {
    const WhiteBoxCase& box = white_box_cases()[std::get<0>(GetParam())];
    for (DType dtype : kDTypes)
      for (int32_t type : {0, 1}) {
        const Problem p(white_box_spec(box, dtype, type, v));
        check(p, compute(p, options()));
      }
  }
};

TEST_P(WhiteBox, MatchesFloat64ReferenceWithinBound) {
  for_each_variant(Values::kUniform, [&](const Problem& p, const Floats& got) {
    EXPECT_TRUE(within_bound(got, reference_f64(p), p.N, p.top_k, describe(p, options())));
  });
}

TEST_P(WhiteBox, SmallIntegerInputsAreExact) {
  for_each_variant(Values::kSmallInt, [&](const Problem& p, const Floats& got) {
    EXPECT_TRUE(equals_reference(got, reference_f64(p), describe(p, options())));
  });
}

INSTANTIATE_TEST_SUITE_P(Seed, WhiteBox,
                         ::testing::Combine(::testing::Range<size_t>(0, white_box_cases().size()),
                                            ::testing::ValuesIn(explicit_isas())),
                         [](const ::testing::TestParamInfo<WhiteBoxParam>& info) {
                           return std::string(white_box_cases()[std::get<0>(info.param)].name) + "_" +
                                  isa_label(std::get<1>(info.param));
                         });

// ---- large-token case (seed: batch = 108*1024, K=128, N=256, top_k=2, G=60) --

using LargeParam = std::tuple<DType, int32_t>;
class LargeTokens : public ::testing::TestWithParam<LargeParam> {};

// Fastest ISA only; a fixed sample of 256 tokens is checked against float64.
// The workspace stays within SPEC §6: at most 8*L bytes plus a few MiB, far
// below the 4*M*K bytes of the non-fused d_expanded_x. Two threads, not one
// per CPU: each worker adds its own regions (README "Workspace"), so with
// about 20 CPUs or more the default would pass the bound by design.
TEST_P(LargeTokens, SampledTokensMatchFloat64Reference) {
  ProblemSpec s = make_spec({.batch = 108 * 1024, .top_k = 2, .experts = 60, .K = 128, .N = 256},
                            std::get<1>(GetParam()), 1.0, 108);
  s.dtype = std::get<0>(GetParam());
  s.value_seed = 1024;
  const Problem p(s);
  const RunOptions o{.isa = fastest_isa(), .threads = 2};
  Outcome outcome;
  const auto got = compute(p, o, &outcome);
  const auto tokens = sample_tokens(p.batch, 256, 42);
  EXPECT_TRUE(within_bound(got, reference_f64(p, tokens), p.N, p.top_k, describe(p, o)));
  const auto ws = static_cast<int64_t>(outcome.workspace_bytes);
  EXPECT_LE(ws, 8 * p.routing.L() + (int64_t{8} << 20)) << describe(p, o);
  EXPECT_LT(ws, 4 * p.M * p.K / 8) << describe(p, o);
}

INSTANTIATE_TEST_SUITE_P(Seed, LargeTokens,
                         ::testing::Values(LargeParam{DType::kF32, 0}, LargeParam{DType::kF16, 1},
                                           LargeParam{DType::kBF16, 0}),
                         [](const ::testing::TestParamInfo<LargeParam>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_type" +
                                  std::to_string(std::get<1>(info.param));
                         });

// ---- routing semantics, per ISA ----------------------------------------------

class Semantics : public IsaTest {
 protected:
  // Runs p and requires the exact (small-integer) result.
  void expect_exact(const Problem& p) {
    const auto got = compute(p, options());
    EXPECT_TRUE(equals_reference(got, reference_f64(p), describe(p, options())));
  }
};

ProblemSpec small_spec(int32_t row_idx_type) {
  ProblemSpec s = make_spec({.batch = 40, .top_k = 2, .experts = 5, .K = 40, .N = 70}, row_idx_type, 0.75, 5);
  s.routing.dropped_keep_row = true;
  s.routing.extra = 3;
  s.values = Values::kSmallInt;
  return s;
}

TEST_P(Semantics, IndexDtypesAndGroupListFormsAgree) {
  for (int32_t type : {0, 1}) {
    ProblemSpec base = small_spec(type);
    const Problem reference_problem(base);
    const auto want = compute(reference_problem, options());
    for (IndexDType idx : {IndexDType::kI32, IndexDType::kI64})
      for (IndexDType gl : {IndexDType::kI32, IndexDType::kI64})
        for (int32_t form : {MOEGRAD_GROUP_LIST_COUNT, MOEGRAD_GROUP_LIST_CUMSUM}) {
          ProblemSpec s = base;
          s.idx_dtype = idx;
          s.group_list_dtype = gl;
          s.group_list_type = form;
          const Problem p(s);
          const auto got = compute(p, options());
          EXPECT_TRUE(equals_reference(got, reference_f64(p), describe(p, options())));
          EXPECT_TRUE(bitwise_equal(got, want, p.K, describe(p, options()) + " vs int64/count"));
        }
  }
}

// Type 0: -1 rows belong to no token; entries at i >= M are ignored even
// when they are out of range.
TEST_P(Semantics, Type0PaddingRowsAndIgnoredTail) {
  ProblemSpec s = small_spec(0);
  s.routing.keep_ratio = 0.6;
  s.routing.extra = 0;
  const Problem plain(s);
  ASSERT_GT(std::count(plain.routing.idx.begin(), plain.routing.idx.end(), -1), 0);
  const auto want = compute(plain, options());
  expect_exact(plain);

  // The same problem with a tail of garbage: L = M + 6.
  s.routing.extra = 6;
  Problem tail(s);
  ASSERT_EQ(tail.routing.L(), tail.M + 6);
  const int64_t garbage[] = {-1, -7, tail.batch * tail.top_k, 1 << 30, 0, 3};
  for (int64_t e = 0; e < 6; ++e) tail.idx.set_index(tail.M + e, garbage[e]);
  const auto got = compute(tail, options());
  EXPECT_TRUE(bitwise_equal(got, want, tail.K, describe(tail, options()) + " (garbage at i >= M)"));
}

// Type 1: dropped slots (-1), rows no position claims, and L < batch*top_k.
TEST_P(Semantics, Type1DroppedSlotsUnclaimedRowsShortIndex) {
  for (bool keep_row : {false, true})
    for (int64_t cut : {int64_t{0}, int64_t{17}, int64_t{79}}) {
      ProblemSpec s = small_spec(1);
      s.routing.keep_ratio = 0.7;
      s.routing.dropped_keep_row = keep_row;
      s.routing.extra = cut;
      const Problem p(s);
      ASSERT_EQ(p.routing.L(), p.batch * p.top_k - cut);
      expect_exact(p);
    }
}

// M = 0: every expert empty; grad_x is all +0.0f (bitwise).
TEST_P(Semantics, MZeroGivesPositiveZeros) {
  for (int32_t type : {0, 1})
    for (int32_t form : {MOEGRAD_GROUP_LIST_COUNT, MOEGRAD_GROUP_LIST_CUMSUM})
      for (DType dtype : kDTypes) {
        ProblemSpec s = small_spec(type);
        s.routing.keep_ratio = 0.0;
        s.routing.dropped_keep_row = false;
        s.routing.extra = type == 0 ? 0 : 10;
        s.group_list_type = form;
        s.dtype = dtype;
        const Problem p(s);
        ASSERT_EQ(p.M, 0);
        const auto got = compute(p, options());
        const Floats zeros(got.size(), 0.0f);
        EXPECT_TRUE(bitwise_equal(got, zeros, p.K, describe(p, options())));
      }
}

// Tokens that no expanded row belongs to get exactly +0.0f (checked by the
// reference comparison); make sure there are many of them.
TEST_P(Semantics, TokensWithoutRowsArePositiveZero) {
  for (int32_t type : {0, 1}) {
    ProblemSpec s = small_spec(type);
    s.routing.keep_ratio = 0.3;
    s.routing.top_k = 1;
    s.values = Values::kUniform;
    const Problem p(s);
    const auto ref = reference_f64(p);
    ASSERT_GT(std::count(ref.has_rows.begin(), ref.has_rows.end(), false), 5);
    const auto got = compute(p, options());
    EXPECT_TRUE(within_bound(got, ref, p.N, p.top_k, describe(p, options())));
  }
}

// Empty experts first, last and in a row; top_k > G (a token meets the same
// expert twice); rows of an expert in slot order and shuffled.
TEST_P(Semantics, EmptyExpertsAndRepeatedExperts) {
  for (int32_t type : {0, 1}) {
    ProblemSpec s = small_spec(type);
    s.routing.experts = 7;
    s.routing.empty_experts = {0, 3, 4, 6};
    s.routing.shuffle_within_expert = false;
    expect_exact(Problem(s));

    s.routing.experts = 2;
    s.routing.top_k = 5;
    s.routing.empty_experts = {};
    s.routing.shuffle_within_expert = true;
    expect_exact(Problem(s));
  }
}

// The library reads its inputs and writes nothing but grad_x.
TEST_P(Semantics, InputsAreNotModified) {
  for (int32_t type : {0, 1}) {
    const Problem p(small_spec(type));
    const auto gy = p.grad_y.storage();
    const auto w = p.weight.storage();
    const auto idx = p.idx.storage();
    const auto gl = p.group_list.storage();
    (void)compute(p, options());
    EXPECT_TRUE(gy == p.grad_y.storage()) << "grad_y modified";
    EXPECT_TRUE(w == p.weight.storage()) << "weight modified";
    EXPECT_TRUE(idx == p.idx.storage()) << "expanded_row_idx modified";
    EXPECT_TRUE(gl == p.group_list.storage()) << "group_list modified";
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Semantics, ::testing::ValuesIn(explicit_isas()), isa_param_name);

}  // namespace
}  // namespace mgt
