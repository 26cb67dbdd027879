// grouped_matmul (forward), grouped_matmul_weight_grad and moe_init_routing_grad
// against float64 references on every ISA path; the two GEMMs against their
// stated FMA chains, bit for bit, and in the fast bf16 mode against its pair
// chains; rounding of f16/bf16 outputs; accumulation; empty experts;
// layouts; the non-fused path (grouped_matmul with weight^T, then the
// scatter-add) giving grad-x's bits; and bitwise identical results on every
// thread count and ISA path.
#include <moegrad/moegrad_layer.h>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <sstream>

#include "fast_bf16_chain.h"
#include "float_formats.h"
#include "ops_support.h"
#include "runtime/cpu_features.h"

namespace mgt::ops {
namespace {

struct GemmCase {
  std::vector<int64_t> counts{5, 0, 17, 1, 9};  // rows per expert, with an empty one
  int64_t K = 19, N = 23;
  DType dtype = DType::kF32;
  bool f32_out = true;
  Fill fill = Fill::kUniform;
  bool weight_nk = false;   // weight is a [G, N, K] buffer seen as [G, K, N]
  bool x_colmajor = false;  // x, grad_y and (unless out_padded) y stored column-major
  bool out_padded = false;  // output rows padded (y) / grad_weight a transposed view
  bool cumsum = false;
  IndexDType gl_dtype = IndexDType::kI64;
  uint64_t seed = 1;

  int64_t G() const { return static_cast<int64_t>(counts.size()); }
  int64_t M() const { return starts_of(counts).back(); }
  DType out_dtype() const { return f32_out ? DType::kF32 : dtype; }
  std::string describe() const {
    std::ostringstream os;
    os << "M=" << M() << " K=" << K << " N=" << N << " G=" << G() << " dtype=" << dtype_name(dtype)
       << " out=" << dtype_name(out_dtype())
       << (fill == Fill::kSmallInt ? " small-int" : fill == Fill::kUniform ? " uniform" : " non-finite")
       << (weight_nk ? " weight[G,N,K]^T" : "") << (x_colmajor ? " x-colmajor" : "")
       << (out_padded ? " out-strided" : "") << (cumsum ? " cumsum" : "") << " gl=" << index_dtype_name(gl_dtype);
    return os.str();
  }
  HostTensor group_list() const {
    std::vector<int64_t> v = counts;
    if (cumsum) {
      const std::vector<int64_t> start = starts_of(counts);
      v.assign(start.begin() + 1, start.end());
    }
    return index_tensor(gl_dtype, {G()}, v);
  }
};

std::vector<int64_t> matrix_strides(bool colmajor, int64_t rows) {
  return colmajor ? std::vector<int64_t>{1, rows} : std::vector<int64_t>{};
}

std::vector<GemmCase> forward_cases() {
  std::vector<GemmCase> out;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
    for (bool f32_out : {true, false}) {
      GemmCase c;
      c.dtype = dtype, c.f32_out = f32_out;
      out.push_back(c);
      c.fill = Fill::kSmallInt;
      out.push_back(c);
      c.fill = Fill::kUniform, c.weight_nk = true, c.out_padded = true, c.cumsum = true;
      c.gl_dtype = IndexDType::kI32;
      out.push_back(c);
      c.x_colmajor = true, c.weight_nk = false;
      out.push_back(c);
      c.out_padded = false;  // column-major y as well
      out.push_back(c);
    }
  GemmCase big;  // several row tiles and K blocks
  big.counts = {300, 0, 251, 7}, big.K = 300, big.N = 270, big.seed = 5;
  out.push_back(big);
  big.dtype = DType::kBF16, big.f32_out = false, big.weight_nk = true;
  out.push_back(big);
  // Experts of several row tiles with K one reduction block: a worker's
  // next tile of an expert reuses the weight panel it packed, and the
  // next expert's, or the next column block's (N 2100: two of at most
  // 2048), must not (the forward's b_key).
  GemmCase tiles;
  tiles.counts = {500, 3, 0, 30}, tiles.K = 24, tiles.N = 2100, tiles.seed = 7;
  out.push_back(tiles);
  tiles.dtype = DType::kBF16, tiles.f32_out = false;  // through the C tile, two column blocks
  out.push_back(tiles);
  // Edge shapes in each dtype: K = 1, N = 1, one row in all, and all three
  // at once (the kernels' one-column and one-row tails, M = 1 after empty
  // experts).
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    GemmCase e;
    e.dtype = dtype, e.f32_out = dtype != DType::kBF16, e.seed = 13;
    e.K = 1;
    out.push_back(e);
    e.K = 19, e.N = 1;
    out.push_back(e);
    e.N = 23, e.counts = {0, 1, 0};
    out.push_back(e);
    e.counts = {1}, e.K = 1, e.N = 1;
    out.push_back(e);
  }
  return out;
}

struct ForwardRun {
  explicit ForwardRun(const GemmCase& c)
      : x(float_tensor(c.dtype, {c.M(), c.K}, c.fill, c.seed, matrix_strides(c.x_colmajor, c.M()))),
        w(float_tensor(c.dtype, {c.G(), c.K, c.N}, c.fill, c.seed + 1,
                       c.weight_nk ? permuted_strides({c.G(), c.K, c.N}, {0, 2, 1}) : std::vector<int64_t>{})),
        gl(c.group_list()),
        y(output_tensor(dl_type(c.out_dtype()), {c.M(), c.N},
                        c.out_padded ? std::vector<int64_t>{c.N + 5, 1} : matrix_strides(c.x_colmajor, c.M()))),
        tx(x.view()), tw(w.view()), tgl(gl.view()), ty(y.view()),
        args{&tx, &tw, &tgl, &ty, c.cumsum ? MOEGRAD_GROUP_LIST_CUMSUM : MOEGRAD_GROUP_LIST_COUNT} {}

  HostTensor x, w, gl, y;
  DLTensor tx, tw, tgl, ty;
  moegrad_grouped_matmul_args args;
};

// The order of a GEMM element: SPEC §5's, or the fast bf16 mode's.
enum class Order { kExact, kFastBf16 };

// The orders written out from their definitions, for the terms t < terms
// of a(t) * b(t). Exact (moegrad_layer.h, for every GEMM): one fp32 FMA
// chain over t ascending from +0.0, inputs widened exactly. Fast bf16:
// mgt::fast_bf16_chain (tests/support/fast_bf16_chain.h).
template <typename A, typename B>
float chain(Order order, int64_t terms, A a, B b) {
  if (order == Order::kFastBf16) return fast_bf16_chain(terms, a, b);
  float acc = 0.0f;
  for (int64_t t = 0; t < terms; ++t) acc = std::fma(a(t), b(t), acc);
  return acc;
}

// Element e of `got` (row-major bits) must be the chain over t < terms of
// a(e, t) * b(e, t) in `order`, then a f16/bf16 output rounded once, a NaN
// stored as the canonical NaN; checked for every element of the small
// cases, and for about 4096 of the large ones (an odd step, so every column
// is met), which keeps the run short under scripts/test_cpus.sh's emulated
// CPUs.
template <typename A, typename B>
::testing::AssertionResult is_chain(const std::vector<uint64_t>& got, DType out, int64_t terms, A a, B b,
                                    const std::string& context, Order order = Order::kExact) {
  const size_t step = got.size() / 4096 | 1;
  for (size_t e = 0; e < got.size(); e += step) {
    float acc = chain(
        order, terms, [&](int64_t t) { return a(e, t); }, [&](int64_t t) { return b(e, t); });
    if (std::isnan(acc)) acc = std::bit_cast<float>(0x7fc00000u);
    const uint64_t want = out == DType::kF16    ? float_to_f16_bits(acc)
                          : out == DType::kBF16 ? float_to_bf16_bits(acc)
                                                : float_bits(acc);
    if (got[e] != want)
      return ::testing::AssertionFailure() << context << ": element " << e << " has bits 0x" << std::hex << got[e]
                                           << ", its " << (order == Order::kExact ? "FMA" : "fast bf16 pair")
                                           << " chain 0x" << want;
  }
  return ::testing::AssertionSuccess();
}

// y[i, n]: the chain over k of x[i, k] * w[g(i), k, n].
::testing::AssertionResult forward_is_chain(const GemmCase& c, const ForwardRun& r, Order order) {
  const std::vector<double> x = float_values(r.x), w = float_values(r.w);
  std::vector<int64_t> expert_of;
  for (int64_t g = 0; g < c.G(); ++g) expert_of.insert(expert_of.end(), c.counts[static_cast<size_t>(g)], g);
  const auto row = [&](size_t e) { return static_cast<int64_t>(e) / c.N; };
  return is_chain(
      bit_values(r.y), c.out_dtype(), c.K,
      [&](size_t e, int64_t k) { return static_cast<float>(x[static_cast<size_t>(row(e) * c.K + k)]); },
      [&](size_t e, int64_t k) {
        const int64_t g = expert_of[static_cast<size_t>(row(e))], n = static_cast<int64_t>(e) % c.N;
        return static_cast<float>(w[static_cast<size_t>((g * c.K + k) * c.N + n)]);
      },
      c.describe(), order);
}

// The float64 comparisons (and the FMA chains) run on every ISA path the
// CPU has: the layer operators have per-ISA kernels (GEMM, row adds) for
// every layout below.
class OpsIsa : public ::testing::TestWithParam<moegrad_isa> {};

TEST_P(OpsIsa, GroupedMatmulMatchesFloat64Reference) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  const auto ctx = make_context(GetParam(), 2);
  for (const GemmCase& c : forward_cases()) {
    ForwardRun r(c);
    const Outcome out = call(r.args, ctx.get());
    ASSERT_TRUE(out.ok()) << c.describe() << ": " << out.describe();
    const Ref64 ref = reference_grouped_matmul(r.x, r.w, c.counts);
    const int64_t terms = c.fill == Fill::kSmallInt ? 0 : c.K;  // small integers: exact
    EXPECT_TRUE(within_bound(r.y, ref, terms, rounding_rel(c.out_dtype()), c.describe()));
    EXPECT_TRUE(forward_is_chain(c, r, Order::kExact));
    EXPECT_TRUE(r.y.sentinel_outside_view()) << c.describe();
  }
}

// A f16/bf16 y is the f32 result rounded once to nearest even.
TEST(GroupedMatmul, NarrowOutputIsTheF32ResultRoundedOnce) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    GemmCase c;
    c.dtype = dtype, c.f32_out = false;
    ForwardRun narrow(c);
    c.f32_out = true;
    ForwardRun wide(c);
    ASSERT_TRUE(call(narrow.args, nullptr).ok());
    ASSERT_TRUE(call(wide.args, nullptr).ok());
    const auto y32 = float_values(wide.y);
    const auto bits = bit_values(narrow.y);
    for (size_t e = 0; e < y32.size(); ++e) {
      const float v = static_cast<float>(y32[e]);
      const uint64_t want = dtype == DType::kF16 ? float_to_f16_bits(v) : float_to_bf16_bits(v);
      ASSERT_EQ(bits[e], want) << dtype_name(dtype) << " element " << e << " f32 value " << v;
    }
  }
}

// A workspace holds the key of the weight panel each worker packed; a run
// must not trust what an earlier run (or a zero-filled workspace) left
// there, nor a panel of another column block. One expert of two row tiles
// and two column blocks with K one block, one thread: the first run starts
// on a zero-filled workspace (key 0 names the first tile's panel), and
// moves from one column block to the next within the expert; a second run
// with another weight on the same workspace follows it.
TEST(GroupedMatmul, ARunReusesNoPanelOfAnEarlierRunsWorkspace) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    GemmCase c;
    c.counts = {300}, c.K = 40, c.N = 2100, c.dtype = dtype;
    ForwardRun first(c);
    c.seed = 2;
    ForwardRun second(c);
    const auto ctx = make_context(fastest_isa(), 1);
    size_t bytes = 0;
    moegrad_op_executor* ex1 = nullptr;
    moegrad_op_executor* ex2 = nullptr;
    ASSERT_EQ(moegrad_grouped_matmul_get_workspace_size(&first.args, ctx.get(), &bytes, &ex1), MOEGRAD_STATUS_SUCCESS);
    ASSERT_EQ(moegrad_grouped_matmul_get_workspace_size(&second.args, ctx.get(), &bytes, &ex2), MOEGRAD_STATUS_SUCCESS);
    std::vector<std::byte> ws(bytes);
    EXPECT_EQ(moegrad_grouped_matmul(ws.data(), bytes, ex1, ctx.get()), MOEGRAD_STATUS_SUCCESS);
    EXPECT_EQ(moegrad_grouped_matmul(ws.data(), bytes, ex2, ctx.get()), MOEGRAD_STATUS_SUCCESS);
    moegrad_op_executor_destroy(ex1);
    moegrad_op_executor_destroy(ex2);
    EXPECT_TRUE(forward_is_chain(c, first, Order::kExact)) << "first run";
    EXPECT_TRUE(forward_is_chain(c, second, Order::kExact)) << "second run";
  }
}

TEST(GroupedMatmul, EmptyProblemWritesNothing) {
  GemmCase c;
  c.counts = {0, 0, 0};
  ForwardRun r(c);
  ASSERT_TRUE(call(r.args, nullptr).ok());
  EXPECT_TRUE(r.y.all_sentinel());
}

struct WeightGradRun {
  WeightGradRun(const GemmCase& c, bool accumulate)
      : x(float_tensor(c.dtype, {c.M(), c.K}, c.fill, c.seed, matrix_strides(c.x_colmajor, c.M()))),
        gy(float_tensor(c.dtype, {c.M(), c.N}, c.fill, c.seed + 1, matrix_strides(c.x_colmajor, c.M()))),
        gl(c.group_list()),
        gw(accumulate ? float_tensor(DType::kF32, {c.G(), c.K, c.N}, Fill::kUniform, c.seed + 2, gw_strides(c))
                      : output_tensor(dl_type(c.out_dtype()), {c.G(), c.K, c.N}, gw_strides(c))),
        tx(x.view()), tgy(gy.view()), tgl(gl.view()), tgw(gw.view()),
        args{&tx, &tgy, &tgl, &tgw, c.cumsum ? MOEGRAD_GROUP_LIST_CUMSUM : MOEGRAD_GROUP_LIST_COUNT,
             accumulate ? 1 : 0} {}

  static std::vector<int64_t> gw_strides(const GemmCase& c) {
    return c.out_padded ? permuted_strides({c.G(), c.K, c.N}, {2, 0, 1}) : std::vector<int64_t>{};
  }

  HostTensor x, gy, gl, gw;
  DLTensor tx, tgy, tgl, tgw;
  moegrad_grouped_matmul_weight_grad_args args;
};

// grad_weight[g, k, n]: the chain over the expert's rows i of x[i, k] *
// grad_y[i, n], from its first row (the fast mode's pairs too). An empty
// expert's chain is empty: exact +0.0, checked on every element (each
// must be written).
::testing::AssertionResult weight_grad_is_chain(const GemmCase& c, const WeightGradRun& r, Order order) {
  const std::vector<double> x = float_values(r.x), gy = float_values(r.gy);
  const std::vector<int64_t> first = starts_of(c.counts);
  const std::vector<uint64_t> got = bit_values(r.gw);
  for (int64_t g = 0; g < c.G(); ++g) {
    const auto begin = static_cast<size_t>(g * c.K * c.N), end = static_cast<size_t>((g + 1) * c.K * c.N);
    const int64_t i0 = first[static_cast<size_t>(g)], rows = c.counts[static_cast<size_t>(g)];
    const std::string what = c.describe() + " expert " + std::to_string(g);
    if (rows == 0) {
      for (size_t e = begin; e < end; ++e)
        if (got[e] != 0u) return ::testing::AssertionFailure() << what << " element " << e << " is not +0.0";
      continue;
    }
    const auto result = is_chain(
        {got.begin() + static_cast<ptrdiff_t>(begin), got.begin() + static_cast<ptrdiff_t>(end)}, c.out_dtype(), rows,
        [&](size_t e, int64_t i) {
          return static_cast<float>(x[static_cast<size_t>((i0 + i) * c.K + static_cast<int64_t>(e) / c.N)]);
        },
        [&](size_t e, int64_t i) {
          return static_cast<float>(gy[static_cast<size_t>((i0 + i) * c.N + static_cast<int64_t>(e) % c.N)]);
        },
        what, order);
    if (!result) return result;
  }
  return ::testing::AssertionSuccess();
}

TEST_P(OpsIsa, WeightGradMatchesFloat64Reference) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  const auto ctx = make_context(GetParam(), 2);
  for (const GemmCase& c : forward_cases()) {
    WeightGradRun r(c, false);
    const Outcome out = call(r.args, ctx.get());
    ASSERT_TRUE(out.ok()) << c.describe() << ": " << out.describe();
    const Ref64 ref = reference_weight_grad(r.x, r.gy, c.counts);
    int64_t longest = 0;
    for (int64_t n : c.counts) longest = std::max(longest, n);
    const int64_t terms = c.fill == Fill::kSmallInt ? 0 : longest;
    EXPECT_TRUE(within_bound(r.gw, ref, terms, rounding_rel(c.out_dtype()), c.describe()));
    EXPECT_TRUE(weight_grad_is_chain(c, r, Order::kExact));
  }
}

// accumulate: grad_weight = old + c with one f32 add, c the overwrite result.
// The same in the fast bf16 mode, where the path has its pair kernel.
TEST_P(OpsIsa, WeightGradAccumulateAddsOnceInF32) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  for (bool fast : {false, true}) {
    const auto ctx = make_context(GetParam(), 2, fast);
    for (DType dtype : {DType::kF32, DType::kBF16})
      for (bool strided : {false, true}) {
        GemmCase c;
        c.dtype = dtype, c.out_padded = strided;
        const std::string what = c.describe() + (fast ? " fast bf16" : "");
        WeightGradRun fresh(c, false), acc(c, true);
        const auto old = float_values(acc.gw);
        const Outcome first = call(fresh.args, ctx.get());
        if (fast && first.status == MOEGRAD_STATUS_ISA_UNAVAILABLE && GetParam() != MOEGRAD_ISA_SCALAR) {
          // Only where the path has no pair kernel: a table that lost the
          // mode must fail here, not skip.
          EXPECT_FALSE(GetParam() == MOEGRAD_ISA_AVX512 && moegrad::runtime::cpu_features().avx512bf16)
              << what << ": fast bf16 refused on a CPU with AVX512_BF16";
          continue;
        }
        ASSERT_TRUE(first.ok()) << what << ": " << first.describe();
        const Outcome out = call(acc.args, ctx.get());
        ASSERT_TRUE(out.ok()) << what << ": " << out.describe();
        const auto add = float_values(fresh.gw), got = float_values(acc.gw);
        for (size_t e = 0; e < got.size(); ++e)
          ASSERT_EQ(float_bits(static_cast<float>(got[e])),
                    float_bits(static_cast<float>(old[e]) + static_cast<float>(add[e])))
              << what << " element " << e;
      }
  }
}

TEST(GroupedMatmulWeightGrad, NoRowsGivesZeros) {
  GemmCase c;
  c.counts = {0, 0};
  WeightGradRun r(c, false);
  ASSERT_TRUE(call(r.args, nullptr).ok());
  for (uint64_t b : bit_values(r.gw)) ASSERT_EQ(b, 0u);
}

// Each worker of a run books its own packing buffers, so a plan books
// them only for as many workers as the run can have items: one row among
// three experts is one forward tile, and three weight-grad items (an item
// per expert, K and N one block each). 64 threads must then need no more
// workspace than 4, and the 64-thread plans still give the chains.
TEST(GemmOps, WorkspaceDoesNotGrowPastTheWorkItems) {
  GemmCase c;
  c.counts = {0, 1, 0}, c.K = 200, c.N = 70;
  size_t forward_bytes[2] = {0, 0}, weight_grad_bytes[2] = {0, 0};
  const int32_t threads[2] = {4, 64};
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(std::to_string(threads[i]) + " threads");
    const auto ctx = make_context(fastest_isa(), threads[i]);
    ForwardRun f(c);
    WeightGradRun w(c, false);
    moegrad_op_executor* ex = nullptr;
    ASSERT_EQ(moegrad_grouped_matmul_get_workspace_size(&f.args, ctx.get(), &forward_bytes[i], &ex),
              MOEGRAD_STATUS_SUCCESS);
    std::vector<std::byte> ws(forward_bytes[i]);
    EXPECT_EQ(moegrad_grouped_matmul(ws.data(), ws.size(), ex, ctx.get()), MOEGRAD_STATUS_SUCCESS);
    moegrad_op_executor_destroy(ex);
    ASSERT_EQ(moegrad_grouped_matmul_weight_grad_get_workspace_size(&w.args, ctx.get(), &weight_grad_bytes[i], &ex),
              MOEGRAD_STATUS_SUCCESS);
    ws.resize(weight_grad_bytes[i]);
    EXPECT_EQ(moegrad_grouped_matmul_weight_grad(ws.data(), ws.size(), ex, ctx.get()), MOEGRAD_STATUS_SUCCESS);
    moegrad_op_executor_destroy(ex);
    EXPECT_TRUE(forward_is_chain(c, f, Order::kExact));
    EXPECT_TRUE(weight_grad_is_chain(c, w, Order::kExact));
  }
  EXPECT_EQ(forward_bytes[1], forward_bytes[0]) << "grouped_matmul: one item";
  EXPECT_EQ(weight_grad_bytes[1], weight_grad_bytes[0]) << "grouped_matmul_weight_grad: three items";
}

// The cap is the most items a run of the plan's shape can have, whatever
// the group list: eight rows may be eight experts' tiles, so the forward
// keeps a worker for each of eight threads (the run gives each an item).
TEST(GemmOps, TheForwardKeepsAWorkerForEveryTileTheRowsCanMake) {
  GemmCase c;
  c.counts = {1, 1, 1, 1, 1, 1, 1, 1}, c.K = 200, c.N = 70;
  ForwardRun f(c);
  size_t bytes[3] = {0, 0, 0};
  const int32_t threads[3] = {4, 8, 64};
  for (int i = 0; i < 3; ++i) {
    const auto ctx = make_context(fastest_isa(), threads[i]);
    moegrad_op_executor* ex = nullptr;
    ASSERT_EQ(moegrad_grouped_matmul_get_workspace_size(&f.args, ctx.get(), &bytes[i], &ex), MOEGRAD_STATUS_SUCCESS);
    moegrad_op_executor_destroy(ex);
  }
  EXPECT_GT(bytes[1], bytes[0]) << "8 threads, 8 tiles: more workers than 4";
  EXPECT_EQ(bytes[2], bytes[1]) << "64 threads, 8 tiles: no more workers than 8";
}

// moe_init_routing_grad books its per-worker row buffers for no more
// workers than items: 3 tokens and K 8 are one column block of at most 3
// token chunks, so 64 threads need the workspace of 3, and get the result.
TEST(GemmOps, RoutingGradWorkspaceDoesNotGrowPastTheWorkItems) {
  const int64_t batch = 3, K = 8;
  HostTensor d = float_tensor(DType::kF32, {batch, K}, Fill::kSmallInt, 5);
  HostTensor index = index_tensor(IndexDType::kI32, {batch}, {0, 1, 2});
  size_t bytes[3] = {0, 0, 0};
  const int32_t threads[3] = {1, 3, 64};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(std::to_string(threads[i]) + " threads");
    const auto ctx = make_context(fastest_isa(), threads[i]);
    HostTensor gx = output_tensor(kDLF32, {batch, K});
    DLTensor td = d.view(), tidx = index.view(), tgx = gx.view();
    const moegrad_moe_init_routing_grad_args args{&td, &tidx, &tgx, batch, 1, MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL};
    moegrad_op_executor* ex = nullptr;
    ASSERT_EQ(moegrad_moe_init_routing_grad_get_workspace_size(&args, ctx.get(), &bytes[i], &ex),
              MOEGRAD_STATUS_SUCCESS);
    std::vector<std::byte> ws(bytes[i]);
    EXPECT_EQ(moegrad_moe_init_routing_grad(ws.data(), ws.size(), ex, ctx.get()), MOEGRAD_STATUS_SUCCESS);
    moegrad_op_executor_destroy(ex);
    EXPECT_EQ(bit_values(gx), bit_values(d)) << "top_k 1: each token's row is its grad_x";
  }
  EXPECT_EQ(bytes[2], bytes[1]) << "64 threads, 3 items: no more workers than 3";
}

// A routing for the scatter-add tests: rows of experts with padding rows and
// dropped slots, in either index direction. owner[i] = token of row i or -1.
struct ScatterRouting {
  ScatterRouting(int64_t batch, int64_t top_k, int64_t G, int32_t type, uint64_t seed) : batch(batch), top_k(top_k) {
    const auto experts = random_experts(batch, top_k, G, seed, {1});
    const RefRouting r = reference_routing(experts, top_k, G, -1, batch * top_k / G);
    counts = r.counts;
    M = r.M;
    owner.resize(static_cast<size_t>(M));
    std::vector<int64_t> idx(static_cast<size_t>(type == 0 ? M + 3 : batch * top_k), -1);
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < M; ++i) {
      const bool padding = rng() % 7 == 0;  // a row that belongs to no token
      owner[static_cast<size_t>(i)] = padding ? -1 : r.pos[static_cast<size_t>(i)] / top_k;
      if (type == 0) idx[static_cast<size_t>(i)] = padding ? -1 : r.pos[static_cast<size_t>(i)];
      else if (!padding) idx[static_cast<size_t>(r.pos[static_cast<size_t>(i)])] = i;
    }
    if (type == 0)
      for (int64_t i = M; i < M + 3; ++i) idx[static_cast<size_t>(i)] = 0;  // entries past M are ignored
    index = index_tensor(IndexDType::kI32, {static_cast<int64_t>(idx.size())}, idx);
  }
  int64_t batch, top_k, M = 0;
  std::vector<int64_t> counts, owner;
  HostTensor index;
};

TEST_P(OpsIsa, MoeInitRoutingGradMatchesFloat64Reference) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  const auto ctx = make_context(GetParam(), 2);
  for (int32_t type : {0, 1})
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
      for (bool strided : {false, true})
        for (int64_t K : {45, 1}) {
          ScatterRouting s(37, 3, 5, type, 11);
          HostTensor d = float_tensor(dtype, {s.M, K}, Fill::kUniform, 3, matrix_strides(strided, s.M));
          HostTensor gx = output_tensor(kDLF32, {s.batch, K}, matrix_strides(strided, s.batch));
          DLTensor td = d.view(), tidx = s.index.view(), tgx = gx.view();
          const moegrad_moe_init_routing_grad_args args{&td, &tidx, &tgx, s.batch, s.top_k, type};
          const Outcome out = call(args, ctx.get());
          ASSERT_TRUE(out.ok()) << out.describe();
          const Ref64 ref = reference_scatter_add(d, s.owner, s.batch);
          const std::string what = std::string("type ") + std::to_string(type) + " " + dtype_name(dtype) +
                                   " K=" + std::to_string(K) + (strided ? " column-major" : "");
          EXPECT_TRUE(within_bound(gx, ref, s.top_k, 0.0, what));
          // Tokens without rows: exact +0.0.
          const auto bits = bit_values(gx);
          for (int64_t b = 0; b < s.batch; ++b) {
            if (std::find(s.owner.begin(), s.owner.end(), b) != s.owner.end()) continue;
            for (int64_t k = 0; k < K; ++k) ASSERT_EQ(bits[static_cast<size_t>(b * K + k)], 0u) << what;
          }
        }
}

// The non-fused path: d_expanded_x = grouped_matmul(grad_y, weight^T) in f32,
// then moe_init_routing_grad; SPEC §5 makes it bitwise equal to grad-x.
::testing::AssertionResult nonfused_equals_fused(DType dtype, int32_t type, const moegrad_context* ctx) {
  ScatterRouting s(53, 2, 4, type, 21);
  const int64_t K = 70, N = 90, G = static_cast<int64_t>(s.counts.size());
  HostTensor grad_y = float_tensor(dtype, {s.M, N}, Fill::kUniform, 5);
  HostTensor weight = float_tensor(dtype, {G, K, N}, Fill::kUniform, 6);
  HostTensor gl = index_tensor(IndexDType::kI64, {G}, s.counts);
  HostTensor fused = output_tensor(kDLF32, {s.batch, K}), nonfused = output_tensor(kDLF32, {s.batch, K});
  HostTensor d_expanded = output_tensor(kDLF32, {s.M, K});
  DLTensor tgy = grad_y.view(), tw = weight.view(), tgl = gl.view(), tidx = s.index.view();
  DLTensor tfused = fused.view(), tnonfused = nonfused.view(), td = d_expanded.view();
  // weight [G, K, N] seen as [G, N, K]: the forward GEMM computes grad_y @ weight[g]^T.
  const std::vector<int64_t> wt_shape{G, N, K}, wt_strides{K * N, 1, N};
  DLTensor twt = tw;
  twt.shape = const_cast<int64_t*>(wt_shape.data());
  twt.strides = const_cast<int64_t*>(wt_strides.data());

  const moegrad_grad_x_args gx{&tgy, &tw, &tidx, &tgl, &tfused, s.batch, s.top_k, type, MOEGRAD_GROUP_LIST_COUNT};
  if (moegrad_grad_x_run(&gx, ctx) != MOEGRAD_STATUS_SUCCESS)
    return ::testing::AssertionFailure() << "grad_x: " << moegrad_last_error_message();
  const moegrad_grouped_matmul_args mm{&tgy, &twt, &tgl, &td, MOEGRAD_GROUP_LIST_COUNT};
  if (Outcome o = call(mm, ctx); !o.ok()) return ::testing::AssertionFailure() << o.describe();
  const moegrad_moe_init_routing_grad_args scatter{&td, &tidx, &tnonfused, s.batch, s.top_k, type};
  if (Outcome o = call(scatter, ctx); !o.ok()) return ::testing::AssertionFailure() << o.describe();
  return same_bits(nonfused, fused, std::string(dtype_name(dtype)) + " type " + std::to_string(type));
}

TEST_P(OpsIsa, NonFusedPathGivesGradXBits) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  for (int32_t threads : {1, 3}) {
    const auto ctx = make_context(GetParam(), threads);
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
      for (int32_t type : {0, 1})
        EXPECT_TRUE(nonfused_equals_fused(dtype, type, ctx.get())) << run_label(GetParam(), threads);
  }
}

// The three operators on one medium problem, uniform values (rounding
// matters): the same bits as the scalar path on one thread.
struct Outputs {
  HostTensor y, gw, gw_narrow, gx;
};

Outputs run_all(const moegrad_context* ctx) {
  GemmCase c;
  c.counts = {130, 0, 261, 1, 77}, c.K = 150, c.N = 200, c.dtype = DType::kBF16, c.seed = 77;
  ForwardRun f(c);
  WeightGradRun w(c, false);
  c.f32_out = false;
  WeightGradRun wn(c, false);
  ScatterRouting s(211, 3, 5, 0, 8);
  HostTensor d = float_tensor(DType::kF16, {s.M, 96}, Fill::kUniform, 4);
  HostTensor gx = output_tensor(kDLF32, {s.batch, 96});
  DLTensor td = d.view(), tidx = s.index.view(), tgx = gx.view();
  const moegrad_moe_init_routing_grad_args scatter{&td, &tidx, &tgx, s.batch, s.top_k, 0};
  for (Outcome o : {call(f.args, ctx), call(w.args, ctx), call(wn.args, ctx), call(scatter, ctx)})
    EXPECT_TRUE(o.ok()) << o.describe();
  return Outputs{std::move(f.y), std::move(w.gw), std::move(wn.gw), std::move(gx)};
}

TEST_P(OpsIsa, SameBitsOnEveryThreadCountAndIsa) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  const auto scalar = make_context(MOEGRAD_ISA_SCALAR, 1);
  const Outputs want = run_all(scalar.get());
  for (int32_t threads : {1, 2, 3}) {
    const auto ctx = make_context(GetParam(), threads);
    const Outputs got = run_all(ctx.get());
    const std::string what = run_label(GetParam(), threads) + " vs scalar, 1 thread";
    EXPECT_TRUE(same_bits(got.y, want.y, "grouped_matmul " + what));
    EXPECT_TRUE(same_bits(got.gw, want.gw, "weight_grad f32 " + what));
    EXPECT_TRUE(same_bits(got.gw_narrow, want.gw_narrow, "weight_grad bf16 " + what));
    EXPECT_TRUE(same_bits(got.gx, want.gx, "moe_init_routing_grad " + what));
  }
}

// The fast bf16 mode's cases: forward_cases()'s bf16 cases, and its f32
// cases with experts of several row tiles or reduction blocks both as
// they are (f32 ignores the mode: the exact order) and in bf16 (odd K and
// odd expert starts, so pairs run from each expert's first row; a [G, N,
// K] weight, column-major x and grad_y, strided outputs; two reduction
// blocks, an expert of more than 256 rows, experts of several tiles and
// two column blocks); then non-finite values, then denormal inputs and
// results, which the mode flushes (the case marks that).
struct FastCase {
  GemmCase gemm;
  bool denormals = false;
};

std::vector<FastCase> fast_bf16_cases() {
  std::vector<FastCase> out;
  for (GemmCase c : forward_cases()) {
    const bool large = c.M() > 100;
    if (c.dtype == DType::kF16 || (c.dtype == DType::kF32 && !large)) continue;
    if (c.dtype == DType::kF32) out.push_back({c, false});
    c.dtype = DType::kBF16;
    out.push_back({c, false});
  }
  GemmCase c;
  c.dtype = DType::kBF16, c.fill = Fill::kNonFinite, c.seed = 3;
  out.push_back({c, false});
  c.fill = Fill::kUniform, c.counts = {6, 3, 0, 40}, c.K = 37, c.N = 70, c.seed = 9;
  out.push_back({c, true});
  return out;
}

// Denormal bf16 inputs (read as zero by the mode) against large ones, whose
// products would be normal, and tiny pairs whose products are denormal
// (flushed): a[e] = +-2^-130 every third element, +-2^-70 every seventh;
// b[e] = 2^100 every fifth, 2^-70 every eleventh.
void add_denormals(HostTensor& a, int64_t a_rows, int64_t a_cols, HostTensor& b, int64_t b_rows, int64_t b_cols,
                   bool b_3d = false, int64_t b_outer = 1) {
  for (int64_t i = 0; i < a_rows; ++i)
    for (int64_t j = 0; j < a_cols; ++j) {
      const int64_t e = i * a_cols + j;
      const float sign = e % 2 == 0 ? 1.0f : -1.0f;
      if (e % 3 == 0) a.set_float(a.offset({i, j}), sign * std::ldexp(1.0f, -130));
      else if (e % 7 == 0) a.set_float(a.offset({i, j}), sign * std::ldexp(1.0f, -70));
    }
  for (int64_t o = 0; o < b_outer; ++o)
    for (int64_t i = 0; i < b_rows; ++i)
      for (int64_t j = 0; j < b_cols; ++j) {
        const int64_t e = (o * b_rows + i) * b_cols + j;
        const int64_t at = b_3d ? b.offset({o, i, j}) : b.offset({i, j});
        if (e % 5 == 0) b.set_float(at, std::ldexp(1.0f, 100));
        else if (e % 11 == 0) b.set_float(at, std::ldexp(1.0f, -70));
      }
}

// The order a context in the fast bf16 mode runs for case c (where it runs).
Order fast_order(const GemmCase& c) { return c.dtype == DType::kBF16 ? Order::kFastBf16 : Order::kExact; }

// README, "Fast bf16 mode": both GEMMs give the mode's pair chains, bit for
// bit, on the scalar path (the emulation) and on avx512 where the CPU has
// AVX512_BF16, on every thread count; avx2, which has no pair kernel,
// refuses bf16 and leaves the outputs untouched (the next test: how).
TEST_P(OpsIsa, FastBf16GemmsGiveThePairChains) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  for (int32_t threads : {1, 3}) {
    const auto ctx = make_context(GetParam(), threads, true);
    for (const FastCase& fc : fast_bf16_cases()) {
      const GemmCase& c = fc.gemm;
      const std::string what = c.describe() + (fc.denormals ? " denormals " : " ") + run_label(GetParam(), threads);
      ForwardRun f(c);
      WeightGradRun w(c, false);
      if (fc.denormals) {
        add_denormals(f.x, c.M(), c.K, f.w, c.K, c.N, true, c.G());
        add_denormals(w.x, c.M(), c.K, w.gy, c.M(), c.N);
      }
      const Outcome fo = call(f.args, ctx.get());
      if (GetParam() == MOEGRAD_ISA_AVX2 && c.dtype == DType::kBF16) {  // no pair kernel
        EXPECT_EQ(fo.status, MOEGRAD_STATUS_ISA_UNAVAILABLE) << what << ": " << fo.describe();
        EXPECT_EQ(call(w.args, ctx.get()).status, MOEGRAD_STATUS_ISA_UNAVAILABLE) << what;
        EXPECT_TRUE(f.y.all_sentinel() && w.gw.all_sentinel()) << what;
        continue;
      }
      if (fo.status == MOEGRAD_STATUS_ISA_UNAVAILABLE && GetParam() == MOEGRAD_ISA_AVX512) {
        // Only where the CPU lacks the instruction (cpu_features_test holds
        // that detection to libgcc's): a table that lost the mode fails.
        ASSERT_FALSE(moegrad::runtime::cpu_features().avx512bf16) << "fast bf16 refused on a CPU with AVX512_BF16";
        GTEST_SKIP() << "no AVX512_BF16 on this CPU: " << fo.describe();
      }
      ASSERT_TRUE(fo.ok()) << what << ": " << fo.describe();
      EXPECT_TRUE(forward_is_chain(c, f, fast_order(c))) << what;
      const Outcome wo = call(w.args, ctx.get());
      ASSERT_TRUE(wo.ok()) << what << ": " << wo.describe();
      EXPECT_TRUE(weight_grad_is_chain(c, w, fast_order(c))) << what;
      if (fc.denormals) {  // else nothing was flushed
        EXPECT_FALSE(forward_is_chain(c, f, Order::kExact)) << what << ": the case must differ from the exact order";
        EXPECT_FALSE(weight_grad_is_chain(c, w, Order::kExact)) << what << ": the case must differ from the exact order";
      }
    }
  }
}

// The padding of an odd reduction is a term of its own: fma(+0, +0, acc)
// turns an accumulated -0 into +0 (round to nearest: -0 + +0 = +0), and a
// last term of -0 then leaves +0. Three terms x * w: -2^-140 (flushed to
// -0 from the +0 start), -2^-140 (-0 + -2^-140 flushed: -0), the padding
// (+0), then -0 * 1 (+0 + -0 = +0): y is +0, where a chain that skipped
// the padding would end at -0. The weight grad reduces over the same
// three rows. Worked by hand, and the instruction's bits.
TEST(FastBf16Ops, OddReductionsEndWithThePaddingTerm) {
  const float a[3] = {-0x1p-70f, -0x1p-70f, -0.0f}, b[3] = {0x1p-70f, 0x1p-70f, 1.0f};
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX512}) {
    if (!moegrad_isa_available(isa)) continue;
    const auto ctx = make_context(isa, 1, true);
    GemmCase c;
    c.dtype = DType::kBF16, c.counts = {1}, c.K = 3, c.N = 1;
    ForwardRun f(c);
    for (int64_t k = 0; k < 3; ++k) {
      f.x.set_float(f.x.offset({0, k}), a[k]);
      f.w.set_float(f.w.offset({0, k, 0}), b[k]);
    }
    const Outcome fo = call(f.args, ctx.get());
    if (fo.status == MOEGRAD_STATUS_ISA_UNAVAILABLE && isa == MOEGRAD_ISA_AVX512) {
      ASSERT_FALSE(moegrad::runtime::cpu_features().avx512bf16) << "fast bf16 refused on a CPU with AVX512_BF16";
      continue;
    }
    const std::string what = run_label(isa, 1);
    ASSERT_TRUE(fo.ok()) << what << ": " << fo.describe();
    EXPECT_EQ(bit_values(f.y), std::vector<uint64_t>{0u}) << what << " forward";
    EXPECT_TRUE(forward_is_chain(c, f, Order::kFastBf16)) << what;
    c.counts = {3}, c.K = 1;
    WeightGradRun w(c, false);
    for (int64_t i = 0; i < 3; ++i) {
      w.x.set_float(w.x.offset({i, 0}), a[i]);
      w.gy.set_float(w.gy.offset({i, 0}), b[i]);
    }
    const Outcome wo = call(w.args, ctx.get());
    ASSERT_TRUE(wo.ok()) << what << ": " << wo.describe();
    EXPECT_EQ(bit_values(w.gw), std::vector<uint64_t>{0u}) << what << " weight grad";
    EXPECT_TRUE(weight_grad_is_chain(c, w, Order::kFastBf16)) << what;
  }
}

// A context in the fast bf16 mode whose path has no pair kernel (avx2)
// refuses to plan a bf16 GEMM, as grad-x does, and leaves the output
// untouched; f32 runs, in the exact order.
TEST(FastBf16Ops, RefusedOnAvx2) {
  MGT_SKIP_UNLESS_AVAILABLE(MOEGRAD_ISA_AVX2);
  const auto ctx = make_context(MOEGRAD_ISA_AVX2, 2, true);
  GemmCase c;
  c.dtype = DType::kBF16;
  for (bool one_shot : {false, true}) {
    ForwardRun f(c);
    WeightGradRun w(c, false);
    for (const Outcome& o : {call(f.args, ctx.get(), one_shot), call(w.args, ctx.get(), one_shot)}) {
      EXPECT_EQ(o.status, MOEGRAD_STATUS_ISA_UNAVAILABLE) << o.describe();
      EXPECT_NE(o.message.find("fast bf16 mode needs AVX512_BF16"), std::string::npos) << o.message;
    }
    EXPECT_TRUE(f.y.all_sentinel());
    EXPECT_TRUE(w.gw.all_sentinel());
  }
  c.dtype = DType::kF32;
  ForwardRun f(c);
  ASSERT_TRUE(call(f.args, ctx.get()).ok());
  EXPECT_TRUE(forward_is_chain(c, f, Order::kExact));
}

// README, "NaN": every NaN an operator stores is the one canonical NaN
// (f32 0x7fc00000, f16 0x7e00, bf16 0x7fc0), whichever NaNs met on the way;
// the NaN elements are the float64 reference's (nothing overflows f32 at
// these sizes, and inf * 0, inf - inf give NaN in both).
::testing::AssertionResult nans_are_canonical(const HostTensor& got, const std::vector<double>& ref, DType out,
                                              const std::string& what) {
  const std::vector<uint64_t> bits = bit_values(got);
  const uint64_t canonical = out == DType::kF32 ? 0x7fc00000u : out == DType::kF16 ? 0x7e00u : 0x7fc0u;
  const uint64_t magnitude = out == DType::kF32 ? 0x7fffffffu : 0x7fffu;
  const uint64_t inf = out == DType::kF32 ? 0x7f800000u : out == DType::kF16 ? 0x7c00u : 0x7f80u;
  size_t nans = 0;
  for (size_t e = 0; e < bits.size(); ++e) {
    const bool is_nan = (bits[e] & magnitude) > inf;
    if (std::isnan(ref[e])) {
      ++nans;
      if (bits[e] != canonical)
        return ::testing::AssertionFailure() << what << ": element " << e << " has bits 0x" << std::hex << bits[e]
                                             << ", the canonical NaN is 0x" << canonical;
    } else if (is_nan) {
      return ::testing::AssertionFailure() << what << ": element " << e << " is NaN, its reference " << ref[e];
    }
  }
  if (nans == 0 || nans == bits.size())
    return ::testing::AssertionFailure() << what << ": " << nans << " of " << bits.size()
                                         << " elements NaN; the case must mix NaN and other elements";
  return ::testing::AssertionSuccess();
}

// NaNs of both signs and random payloads (quiet and signalling),
// infinities and zeros in every input: outputs the GEMM writes straight
// (f32, contiguous), through a tile (strided or f16/bf16), added into
// (accumulate, the scatter-add).
TEST_P(OpsIsa, EveryNaNIsTheCanonicalNaN) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  const auto ctx = make_context(GetParam(), 2);
  std::vector<GemmCase> cases(4);
  cases[1].out_padded = true;
  cases[2].dtype = DType::kBF16, cases[2].f32_out = false;
  cases[3].dtype = DType::kF16, cases[3].f32_out = false, cases[3].out_padded = true;
  for (GemmCase& c : cases) {
    c.fill = Fill::kNonFinite, c.seed = 3;
    ForwardRun f(c);
    ASSERT_TRUE(call(f.args, ctx.get()).ok()) << c.describe();
    EXPECT_TRUE(nans_are_canonical(f.y, reference_grouped_matmul(f.x, f.w, c.counts).value, c.out_dtype(),
                                   "grouped_matmul " + c.describe()));
    for (bool accumulate : {false, true}) {
      if (accumulate && !c.f32_out) continue;  // accumulate takes an f32 grad_weight
      WeightGradRun w(c, accumulate);
      ASSERT_TRUE(call(w.args, ctx.get()).ok()) << c.describe();
      EXPECT_TRUE(nans_are_canonical(w.gw, reference_weight_grad(w.x, w.gy, c.counts).value, c.out_dtype(),
                                     "weight_grad " + c.describe() + (accumulate ? " accumulate" : "")));
    }
  }
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (bool strided : {false, true}) {
      ScatterRouting s(37, 3, 5, 0, 11);
      HostTensor d = float_tensor(dtype, {s.M, 45}, Fill::kNonFinite, 3, matrix_strides(strided, s.M));
      HostTensor gx = output_tensor(kDLF32, {s.batch, 45}, matrix_strides(strided, s.batch));
      DLTensor td = d.view(), tidx = s.index.view(), tgx = gx.view();
      const moegrad_moe_init_routing_grad_args args{&td, &tidx, &tgx, s.batch, s.top_k, 0};
      ASSERT_TRUE(call(args, ctx.get()).ok());
      EXPECT_TRUE(nans_are_canonical(gx, reference_scatter_add(d, s.owner, s.batch).value, DType::kF32,
                                     std::string("moe_init_routing_grad ") + dtype_name(dtype) +
                                         (strided ? " column-major" : "")));
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, OpsIsa, ::testing::ValuesIn(explicit_isas()),
                         [](const auto& info) { return std::string(isa_label(info.param)); });

}  // namespace
}  // namespace mgt::ops
