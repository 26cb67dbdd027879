// Poisoned memory: the workspace and grad_x start out full of NaNs, infinities
// or garbage bytes, the workspace at any misalignment and reused across
// executors; the result is bitwise the same as from clean memory and as SPEC
// §5's order, every grad_x element is written (tokens without rows get exact
// +0.0f), and nothing between grad_x's elements is. A result that depended
// on anything uninitialised would change with the poison.
//
// Valgrind.* runs the library on truly uninitialised buffers (malloc'd, never
// written) and branches on every result, so `valgrind --tool=memcheck` (see
// scripts/test_valgrind.sh) reports any result that depends on them.
#include <moegrad/moegrad.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "problem.h"
#include "reference.h"
#include "runner.h"

namespace mgh {
namespace {

struct Poison {
  const char* name;
  std::vector<uint8_t> bytes;
};

const Poison kPoisons[] = {
    {"qnan", {0x01, 0x00, 0xC0, 0x7F}},
    {"snan", {0x01, 0x00, 0x80, 0x7F}},
    {"neg_inf", {0x00, 0x00, 0x80, 0xFF}},
    {"all_ones", {0xFF}},
    {"a5", {0xA5}},
    {"neg_zero", {0x00, 0x00, 0x00, 0x80}},
    {"denormal", {0x01, 0x00, 0x00, 0x00}},
    {"mixed", {0x13, 0x37, 0xC0, 0x7F, 0x00, 0x00, 0x80, 0x7F, 0xDE, 0xAD, 0xBE, 0xEF}},
};
const size_t kMisaligns[] = {0, 1, 3, 8, 37, 511};

// Specs with empty experts, padding rows, several column/reduction blocks and
// strided grad_x.
std::vector<ProblemSpec> specs() {
  std::vector<ProblemSpec> out;
  ProblemSpec s;
  s.batch = 13, s.top_k = 3, s.G = 5, s.N = 37, s.K = 29, s.empty_percent = 40, s.seed = 3;
  s.values = Values::kUniform;
  out.push_back(s);
  s.dtype = kBF16, s.row_idx_type = 1, s.gx_layout = Layout::kPadded, s.seed = 4;
  out.push_back(s);
  s.dtype = kF16, s.row_idx_type = 0, s.gx_layout = Layout::kReversed, s.keep_percent = 30, s.seed = 5;
  out.push_back(s);
  s = ProblemSpec{};
  s.batch = 9, s.top_k = 2, s.G = 3, s.N = 300, s.K = 270, s.seed = 6;  // > 256: several kc and nc blocks
  s.values = Values::kUniform;
  out.push_back(s);
  s = ProblemSpec{};
  s.batch = 6, s.top_k = 2, s.G = 4, s.keep_percent = 0, s.padding_rows = false, s.seed = 7;  // M = 0
  out.push_back(s);
  s = ProblemSpec{};
  s.batch = 8, s.top_k = 1, s.G = 4, s.keep_percent = 100, s.padding_rows = true, s.seed = 8;
  s.empty_percent = 0, s.values = Values::kRawBits;  // NaN/inf/denormal inputs
  out.push_back(s);
  return out;
}

// Tokens that own no expanded row.
std::vector<bool> tokens_without_rows(const moegrad_grad_x_args& a) {
  std::vector<bool> none(static_cast<size_t>(a.batch), true);
  for (int64_t b : owner_of_rows(a))
    if (b >= 0) none[static_cast<size_t>(b)] = false;
  return none;
}

class Poisoned : public ::testing::TestWithParam<moegrad_isa> {};

TEST_P(Poisoned, ResultIndependentOfWorkspaceAndGradXContents) {
  const moegrad_isa isa = GetParam();
  if (!moegrad_isa_available(isa)) GTEST_SKIP() << moegrad_isa_name(isa) << " is not available on this CPU";
  for (const ProblemSpec& spec : specs()) {
    Problem p(spec);
    const int64_t K = spec.K;
    const std::vector<float> want = reference_contract(p.args());
    const std::vector<bool> empty_tokens = tokens_without_rows(p.args());

    // Clean run: zeroed workspace and grad_x.
    RunOptions clean;
    clean.plan_ctx = clean.run_ctx = shared_context(isa, 2);
    clean.ws_fill = {0x00};
    p.grad_x.fill_bytes(0x00);
    ASSERT_TRUE(run_grad_x(p.args_ptr(), clean).ok()) << spec.describe();
    const std::vector<float> baseline = read_grad_x(p.grad_x.dl());
    ASSERT_EQ(compare_bits(baseline, want, K), "") << spec.describe();

    for (const Poison& poison : kPoisons) {
      for (size_t misalign : kMisaligns) {
        p.grad_x.fill_from(poison.bytes);
        const std::vector<std::byte> before = p.grad_x.snapshot();
        RunOptions opt = clean;
        opt.ws_fill = poison.bytes;
        opt.misalign = misalign;
        const RunResult r = run_grad_x(p.args_ptr(), opt);
        ASSERT_TRUE(r.ok()) << r.describe();
        const std::vector<float> got = read_grad_x(p.grad_x.dl());
        const std::string where = spec.describe() + " poison=" + poison.name + " misalign=" + std::to_string(misalign);
        EXPECT_EQ(compare_bits(got, baseline, K), "") << where;
        for (int64_t b = 0; b < spec.batch; ++b) {
          if (!empty_tokens[static_cast<size_t>(b)]) continue;
          for (int64_t k = 0; k < K; ++k) {
            uint32_t bits;
            std::memcpy(&bits, &got[static_cast<size_t>(b * K + k)], 4);
            EXPECT_EQ(bits, 0u) << "token " << b << " has no rows: grad_x must be +0.0f; " << where;
          }
        }
        // Nothing outside the elements changed (padding of strided grad_x).
        std::vector<std::byte> after = p.grad_x.snapshot();
        const std::vector<std::byte> expect = [&] {
          std::vector<std::byte> e = before;
          const std::byte* origin = static_cast<const std::byte*>(p.grad_x.dl().data) + p.grad_x.dl().byte_offset;
          for (int64_t i = 0; i < p.grad_x.numel(); ++i) {
            const size_t at = static_cast<size_t>(origin + p.grad_x.offset_of_linear(i) * 4 - p.grad_x.storage());
            std::memcpy(&e[at], &after[at], 4);
          }
          return e;
        }();
        EXPECT_TRUE(after == expect) << "grad_x padding was written; " << where;
      }
    }
  }
}

// One workspace buffer serves executors of different problems in turn: what
// a previous run left in it never leaks into the next result.
TEST_P(Poisoned, WorkspaceReusedAcrossExecutors) {
  const moegrad_isa isa = GetParam();
  if (!moegrad_isa_available(isa)) GTEST_SKIP() << moegrad_isa_name(isa) << " is not available on this CPU";
  const moegrad_context* ctx = shared_context(isa, 2);
  std::vector<ProblemSpec> all = specs();
  std::vector<std::unique_ptr<Problem>> problems;
  size_t max_bytes = 0;
  for (const ProblemSpec& s : all) {
    problems.push_back(std::make_unique<Problem>(s));
    size_t bytes = 0;
    moegrad_executor* raw = nullptr;
    ASSERT_EQ(moegrad_grad_x_get_workspace_size(problems.back()->args_ptr(), ctx, &bytes, &raw),
              MOEGRAD_STATUS_SUCCESS);
    moegrad_executor_destroy(raw);
    max_bytes = std::max(max_bytes, bytes);
  }
  Workspace ws = make_workspace(max_bytes, 5, {0xCD});
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < problems.size(); ++i) {
      Problem& p = *problems[i];
      p.grad_x.fill_words(0x7FC0DEADu);
      size_t bytes = 0;
      moegrad_executor* raw = nullptr;
      ASSERT_EQ(moegrad_grad_x_get_workspace_size(p.args_ptr(), ctx, &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
      ExecutorPtr ex = own(raw);
      ASSERT_EQ(moegrad_grad_x(ws.ptr, ws.bytes, ex.get(), ctx), MOEGRAD_STATUS_SUCCESS);
      EXPECT_EQ(compare_bits(read_grad_x(p.grad_x.dl()), reference_contract(p.args()), p.spec.K), "")
          << p.spec.describe() << " round " << round;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Poisoned, ::testing::Values(MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512),
                         [](const auto& info) { return std::string(moegrad_isa_name(info.param)); });

// Workspace and grad_x straight from malloc, never written by the test. Each
// result is branched on, so under valgrind memcheck a value computed from
// uninitialised memory is an error ("Conditional jump or move depends on
// uninitialised value(s)"). Small, so it stays quick under valgrind; AUTO
// picks what valgrind's CPU model offers (it has no AVX-512).
TEST(Valgrind, UninitialisedWorkspaceAndGradX) {
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AUTO}) {
    for (int32_t type : {0, 1}) {
      ProblemSpec s;
      s.batch = 7, s.top_k = 2, s.G = 4, s.N = 19, s.K = 21, s.row_idx_type = type, s.seed = 21 + type;
      s.empty_percent = 30, s.dtype = type ? kBF16 : kF32;
      Problem p(s);
      const int64_t B = s.batch, K = s.K;
      float* gx_mem = static_cast<float*>(std::malloc(static_cast<size_t>(B * K) * sizeof(float)));
      ASSERT_NE(gx_mem, nullptr);
      DLTensor gx = p.grad_x.dl();
      gx.data = gx_mem;
      gx.byte_offset = 0;
      gx.strides = nullptr;
      moegrad_grad_x_args a = p.args();
      a.grad_x = &gx;

      const moegrad_context* ctx = shared_context(isa, 2);
      size_t bytes = 0;
      moegrad_executor* raw = nullptr;
      ASSERT_EQ(moegrad_grad_x_get_workspace_size(&a, ctx, &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
      ExecutorPtr ex = own(raw);
      void* ws = std::malloc(bytes);
      ASSERT_NE(ws, nullptr);
      ASSERT_EQ(moegrad_grad_x(ws, bytes, ex.get(), ctx), MOEGRAD_STATUS_SUCCESS);
      const std::vector<float> want = reference_contract(a);
      int64_t mismatches = 0;
      for (int64_t i = 0; i < B * K; ++i) {
        uint32_t g, w;
        std::memcpy(&g, &gx_mem[i], 4);
        std::memcpy(&w, &want[static_cast<size_t>(i)], 4);
        if (g != w) ++mismatches;  // the branch memcheck checks
      }
      EXPECT_EQ(mismatches, 0) << s.describe() << " isa " << moegrad_isa_name(isa);
      std::free(ws);
      std::free(gx_mem);
    }
  }
}

}  // namespace
}  // namespace mgh
