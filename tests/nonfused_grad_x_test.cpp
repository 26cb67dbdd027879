// The non-fused baseline that `moegrad run` and `moegrad bench` compare the
// fused operator against (api/nonfused_grad_x.h): a grouped GEMM into the
// whole d_expanded_x, then the scatter-add. SPEC §5 fixes the order of every
// sum, so its grad_x must carry the scalar fused path's bits, whatever the
// thread count and however its scatter-add splits the columns among the
// threads (driver/scatter_add_split.h).
#include <moegrad/moegrad.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "api/nonfused_grad_x.h"
#include "driver/scatter_add_split.h"
#include "problem.h"
#include "reference.h"
#include "runner.h"

namespace mgt {
namespace {

using moegrad::driver::scatter_add_block_width;

// The rule, worked out by hand: about four blocks a thread, at least 512
// columns unless a thread would have none, never under 64, whole 64-byte
// lines.
TEST(ScatterAddSplit, BlockWidths) {
  EXPECT_EQ(scatter_add_block_width(128, 1), 128);    // large-token, one thread: one block
  EXPECT_EQ(scatter_add_block_width(128, 2), 64);     // two threads: a block each
  EXPECT_EQ(scatter_add_block_width(128, 8), 64);     // never under 64
  EXPECT_EQ(scatter_add_block_width(2048, 1), 512);   // fine-grained: 4 x 512
  EXPECT_EQ(scatter_add_block_width(2048, 2), 512);   // 512 beats 8 x 256
  EXPECT_EQ(scatter_add_block_width(7168, 1), 1792);  // zmoe: 4 a thread
  EXPECT_EQ(scatter_add_block_width(7168, 2), 896);
  EXPECT_EQ(scatter_add_block_width(7168, 4), 512);   // 14 blocks, not 16 of 448
  EXPECT_EQ(scatter_add_block_width(200, 2), 112);    // 100 rounded up to a line
  EXPECT_EQ(scatter_add_block_width(1, 3), 64);
  EXPECT_EQ(scatter_add_block_width(100, 0), 112);    // no threads: taken as one
}

// Every split covers K in whole lines, at least 64 columns a block, never
// wider than a thread's share of K (rounded up to a line, or 64), and
// never more than four blocks a thread.
TEST(ScatterAddSplit, BlocksCoverKAndServeTheThreads) {
  for (int64_t K = 1; K <= 3000; K += 7)
    for (int threads = 1; threads <= 16; ++threads) {
      const int64_t width = scatter_add_block_width(K, threads), blocks = (K + width - 1) / width;
      ASSERT_EQ(width % 16, 0) << "K " << K << " threads " << threads;
      ASSERT_GE(width, 64) << "K " << K << " threads " << threads;
      ASSERT_GE(blocks * width, K) << "K " << K << " threads " << threads;
      const int64_t share = ((K + threads - 1) / threads + 15) / 16 * 16;
      ASSERT_LE(width, std::max<int64_t>(share, 64)) << "K " << K << " threads " << threads;
      ASSERT_LE(blocks, 4 * int64_t{threads}) << "K " << K << " threads " << threads;
    }
}

// grad_x of the non-fused path into a sentinel-filled (NaN) tensor.
Floats nonfused(const Problem& p, const moegrad_context* ctx) {
  HostTensor grad_x = p.make_grad_x();
  Call call(p, grad_x);
  std::vector<float> d_expanded_x(static_cast<size_t>(p.M * p.K), std::nanf(""));
  const moegrad_status s = moegrad::nonfused_grad_x(call.args, ctx, d_expanded_x.data());
  EXPECT_EQ(s, MOEGRAD_STATUS_SUCCESS) << p.describe() << ": " << moegrad_last_error_message();
  return read_matrix_f32(grad_x);
}

class Nonfused : public IsaTest {};

// K = 128 is large-token's (one GEMM column block, two scatter-add blocks
// with two threads), 200 a K whose blocks end mid-line, 7 and 1 narrower
// than any block; padding rows and dropped slots included; one token on
// 64 experts (a row each, where its slot is kept).
TEST_P(Nonfused, GivesTheScalarFusedBitsForEveryThreadCount) {
  const Dims shapes[] = {{.batch = 300, .top_k = 2, .experts = 5, .K = 128, .N = 40},
                         {.batch = 60, .top_k = 3, .experts = 4, .K = 200, .N = 33},
                         {.batch = 25, .top_k = 2, .experts = 3, .K = 7, .N = 20},
                         {.batch = 9, .top_k = 1, .experts = 2, .K = 1, .N = 1},
                         {.batch = 1, .top_k = 64, .experts = 64, .K = 40, .N = 24}};
  for (const Dims& d : shapes)
    for (int32_t type : {0, 1}) {
      ProblemSpec spec = make_spec(d, type, 0.85, 77);
      spec.routing.dropped_keep_row = true;
      spec.value_seed = 5;
      const Problem p(spec);
      const Floats want = compute(p, {.isa = MOEGRAD_ISA_SCALAR, .threads = 1});
      EXPECT_TRUE(within_bound(want, reference_f64(p), p.N, p.top_k, "scalar fused " + p.describe()));
      for (int32_t threads : {1, 2, 3, 4}) {
        const ContextPtr ctx = make_context(GetParam(), threads);
        EXPECT_TRUE(bitwise_equal(nonfused(p, ctx.get()), want, p.K,
                                  p.describe() + " | non-fused, " + isa_label(GetParam()) + ", threads " +
                                      std::to_string(threads) + " vs scalar fused"));
      }
    }
}

// README, "NaN": NaNs of distinct signs and payloads meet; the non-fused
// path stores each as the canonical NaN, like SPEC §5's order computed by
// the test (reference_contract_order).
TEST_P(Nonfused, EveryNaNIsStoredAsTheCanonicalNaN) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    ProblemSpec spec = make_spec({.batch = 60, .top_k = 3, .experts = 4, .K = 45, .N = 33}, 0, 0.85, 78);
    spec.dtype = dtype;
    spec.values = Values::kNonFinite;
    spec.value_seed = 6;
    const Problem p(spec);
    const Floats want = reference_contract_order(p);
    ASSERT_TRUE(std::any_of(want.begin(), want.end(), [](float v) { return std::isnan(v); })) << p.describe();
    for (int32_t threads : {1, 3}) {
      const ContextPtr ctx = make_context(GetParam(), threads);
      EXPECT_TRUE(bitwise_equal(nonfused(p, ctx.get()), want, p.K,
                                p.describe() + " | non-fused, " + isa_label(GetParam()) + ", threads " +
                                    std::to_string(threads) + " vs SPEC §5 order"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Nonfused, ::testing::ValuesIn(explicit_isas()), isa_param_name);

}  // namespace
}  // namespace mgt
