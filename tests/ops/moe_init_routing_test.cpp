// moe_init_routing: stable sort by expert, capacity and active_num dropping,
// both index directions, padding rows, layouts, and identical results on
// every thread count and ISA path.
#include <moegrad/moegrad_layer.h>

#include <gtest/gtest.h>

#include <sstream>

#include "ops_support.h"

namespace mgt::ops {
namespace {

struct RoutingCase {
  int64_t batch = 13, top_k = 2, G = 5, K = 7;
  int64_t active_num = -1, capacity = -1;
  int32_t row_idx_type = 0;
  DType dtype = DType::kF32;
  IndexDType expert_dtype = IndexDType::kI64, out_dtype = IndexDType::kI64;
  std::vector<int64_t> empty_experts;
  bool strided = false;  // x with padded rows, expert_idx transposed, expanded_x column-major
  uint64_t seed = 1;

  std::string describe() const {
    std::ostringstream os;
    os << "batch=" << batch << " top_k=" << top_k << " G=" << G << " K=" << K << " active_num=" << active_num
       << " capacity=" << capacity << " row_idx_type=" << row_idx_type << " dtype=" << dtype_name(dtype)
       << " experts=" << index_dtype_name(expert_dtype) << " out=" << index_dtype_name(out_dtype)
       << (strided ? " strided" : "");
    return os.str();
  }
};

// The tensors of one call, outputs sentinel-filled.
struct RoutingRun {
  explicit RoutingRun(const RoutingCase& c)
      : experts(random_experts(c.batch, c.top_k, c.G, c.seed, c.empty_experts)),
        ref(reference_routing(experts, c.top_k, c.G, c.active_num, c.capacity)),
        x(float_tensor(c.dtype, {c.batch, c.K}, Fill::kUniform, c.seed + 1,
                       c.strided ? std::vector<int64_t>{c.K + 3, 1} : std::vector<int64_t>{})),
        expert_idx(index_tensor(c.expert_dtype, {c.batch, c.top_k}, experts,
                                c.strided ? std::vector<int64_t>{1, c.batch} : std::vector<int64_t>{})),
        expanded_x(output_tensor(dl_type(c.dtype), {ref.R, c.K},
                                 c.strided ? std::vector<int64_t>{1, ref.R} : std::vector<int64_t>{})),
        row_idx(output_tensor(dl_type(c.out_dtype), {c.row_idx_type == 0 ? ref.R : c.batch * c.top_k})),
        group_list(output_tensor(dl_type(c.out_dtype), {c.G})),
        tx(x.view()), te(expert_idx.view()), tex(expanded_x.view()), tidx(row_idx.view()), tgl(group_list.view()) {
    args = {&tx, &te, &tex, &tidx, &tgl, c.active_num, c.capacity, c.row_idx_type, &num_rows};
  }

  std::vector<int64_t> experts;
  RefRouting ref;
  HostTensor x, expert_idx, expanded_x, row_idx, group_list;
  DLTensor tx, te, tex, tidx, tgl;
  int64_t num_rows = -7;
  moegrad_moe_init_routing_args args{};
};

void expect_matches_reference(const RoutingCase& c, RoutingRun& r) {
  const std::string what = c.describe();
  EXPECT_EQ(r.num_rows, r.ref.M) << what;
  EXPECT_EQ(index_values(r.group_list), r.ref.counts) << what;
  const auto idx = index_values(r.row_idx);
  if (c.row_idx_type == 0) {
    for (int64_t i = 0; i < r.ref.R; ++i)
      ASSERT_EQ(idx[static_cast<size_t>(i)], i < r.ref.M ? r.ref.pos[static_cast<size_t>(i)] : -1) << what << " row " << i;
  } else {
    std::vector<int64_t> want(static_cast<size_t>(c.batch * c.top_k), -1);
    for (int64_t i = 0; i < r.ref.M; ++i) want[static_cast<size_t>(r.ref.pos[static_cast<size_t>(i)])] = i;
    EXPECT_EQ(idx, want) << what;
  }
  // Rows are bit copies of the token rows; padding rows are +0.
  for (int64_t i = 0; i < r.ref.R; ++i)
    for (int64_t k = 0; k < c.K; ++k) {
      const uint64_t got = r.expanded_x.get_bits(r.expanded_x.offset({i, k}));
      const uint64_t want =
          i < r.ref.M ? r.x.get_bits(r.x.offset({r.ref.pos[static_cast<size_t>(i)] / c.top_k, k})) : 0;
      ASSERT_EQ(got, want) << what << " expanded_x[" << i << ", " << k << "]";
    }
  EXPECT_TRUE(r.expanded_x.sentinel_outside_view()) << what;
}

std::vector<RoutingCase> cases() {
  std::vector<RoutingCase> out;
  for (int32_t type : {0, 1})
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      RoutingCase c;
      c.row_idx_type = type;
      c.dtype = dtype;
      out.push_back(c);                            // no dropping
      c.empty_experts = {0, 3};
      out.push_back(c);                            // empty experts
      c.capacity = 3;
      out.push_back(c);                            // capacity drops
      c.active_num = 7;
      out.push_back(c);                            // capacity, then active_num
      c.capacity = -1;
      c.active_num = 11;
      c.expert_dtype = IndexDType::kI32;
      c.out_dtype = IndexDType::kI32;
      out.push_back(c);                            // active_num, int32 everywhere
      c.strided = true;
      c.capacity = 2;
      c.active_num = -1;
      out.push_back(c);                            // strided layouts
    }
  RoutingCase big;  // several copy items, top_k > G/2
  big.batch = 301, big.top_k = 4, big.G = 6, big.K = 33, big.capacity = 150, big.seed = 9;
  out.push_back(big);
  RoutingCase zero;  // active_num = 0: nothing kept
  zero.active_num = 0;
  out.push_back(zero);
  RoutingCase repeat;  // top_k > G: a token picks one expert twice
  repeat.top_k = 4, repeat.G = 3, repeat.row_idx_type = 1;
  out.push_back(repeat);
  for (int32_t type : {0, 1}) {  // one token, one column: copy items of one element
    RoutingCase one;
    one.batch = 1, one.K = 1, one.row_idx_type = type;
    out.push_back(one);
    one.top_k = 1, one.G = 1, one.dtype = DType::kBF16;
    out.push_back(one);
  }
  return out;
}

class MoeInitRoutingIsa : public ::testing::TestWithParam<moegrad_isa> {};

TEST_P(MoeInitRoutingIsa, MatchesStableSortReference) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  const auto ctx = make_context(GetParam(), 2);
  for (const RoutingCase& c : cases()) {
    for (bool one_shot : {false, true}) {
      RoutingRun r(c);
      const Outcome out = call(r.args, ctx.get(), one_shot);
      ASSERT_TRUE(out.ok()) << c.describe() << ": " << out.describe();
      expect_matches_reference(c, r);
    }
  }
}

TEST(MoeInitRouting, NumRowsMayBeNull) {
  RoutingCase c;
  c.capacity = 2;
  RoutingRun r(c);
  r.args.num_rows = nullptr;
  ASSERT_TRUE(call(r.args, nullptr).ok());
  r.num_rows = r.ref.M;
  expect_matches_reference(c, r);
}

// Output of the routing feeds grad-x directly (SPEC §3 in both directions).
TEST(MoeInitRouting, IndexIsValidGradXInput) {
  for (int32_t type : {0, 1}) {
    RoutingCase c;
    c.row_idx_type = type;
    c.capacity = 3;
    c.active_num = 8;
    RoutingRun r(c);
    ASSERT_TRUE(call(r.args, nullptr).ok());
    const int64_t M = r.ref.M, N = 4;
    HostTensor grad_y = float_tensor(DType::kF32, {M, N}, Fill::kSmallInt, 3);
    HostTensor weight = float_tensor(DType::kF32, {c.G, c.K, N}, Fill::kSmallInt, 4);
    HostTensor grad_x = output_tensor(kDLF32, {c.batch, c.K});
    DLTensor gy = grad_y.view(), w = weight.view(), gx = grad_x.view();
    moegrad_grad_x_args args{&gy, &w, &r.tidx, &r.tgl, &gx, c.batch, c.top_k, type, MOEGRAD_GROUP_LIST_COUNT};
    ASSERT_EQ(moegrad_grad_x_run(&args, nullptr), MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
    // Small integers: the fused result is exact; compare with the scatter of the reference rows.
    std::vector<int64_t> owner(static_cast<size_t>(M));
    for (int64_t i = 0; i < M; ++i) owner[static_cast<size_t>(i)] = r.ref.pos[static_cast<size_t>(i)] / c.top_k;
    HostTensor d_expanded(kDLF32, {M, c.K});
    // d_expanded_x[i, k] = sum_n grad_y[i, n] * weight[g(i), k, n]
    const auto start = starts_of(r.ref.counts);
    for (int64_t g = 0; g < c.G; ++g)
      for (int64_t i = start[static_cast<size_t>(g)]; i < start[static_cast<size_t>(g) + 1]; ++i)
        for (int64_t k = 0; k < c.K; ++k) {
          float s = 0;
          for (int64_t n = 0; n < N; ++n)
            s += grad_y.get_float(grad_y.offset({i, n})) * weight.get_float(weight.offset({g, k, n}));
          d_expanded.set_float(d_expanded.offset({i, k}), s);
        }
    const Ref64 want = reference_scatter_add(d_expanded, owner, c.batch);
    const auto got = float_values(grad_x);
    for (size_t e = 0; e < got.size(); ++e) ASSERT_EQ(got[e], want.value[e]) << "type " << type << " element " << e;
  }
}

TEST_P(MoeInitRoutingIsa, SameResultOnEveryThreadCount) {
  MGT_SKIP_UNLESS_AVAILABLE(GetParam());
  RoutingCase c;
  c.batch = 257, c.top_k = 3, c.G = 7, c.K = 40, c.capacity = 90, c.dtype = DType::kBF16;
  for (int32_t threads : {1, 2, 3}) {
    const auto ctx = make_context(GetParam(), threads);
    RoutingRun r(c);
    const Outcome out = call(r.args, ctx.get());
    ASSERT_TRUE(out.ok()) << run_label(GetParam(), threads) << ": " << out.describe();
    expect_matches_reference(c, r);
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, MoeInitRoutingIsa, ::testing::ValuesIn(explicit_isas()),
                         [](const auto& info) { return std::string(isa_label(info.param)); });

// The C++ wrapper: the same R, limits defaulting to none, and a refusal
// thrown with its status and message.
TEST(MoeInitRouting, MaxRowsFromCxx) {
  EXPECT_EQ(moegrad::moe_init_routing_max_rows(10, 3, 4), 30);
  EXPECT_EQ(moegrad::moe_init_routing_max_rows(10, 3, 4, 12), 12);
  EXPECT_EQ(moegrad::moe_init_routing_max_rows(10, 3, 4, 25, 5), 20);  // 4 experts of at most 5 rows
  try {
    moegrad::moe_init_routing_max_rows(0, 3, 4);
    ADD_FAILURE() << "batch 0 was accepted";
  } catch (const moegrad::Error& e) {
    EXPECT_EQ(e.status(), MOEGRAD_STATUS_BAD_BATCH);
    EXPECT_STREQ(e.what(), "batch=0 must be > 0");
  }
}

TEST(MoeInitRouting, MaxRows) {
  int64_t rows = -1;
  ASSERT_EQ(moegrad_moe_init_routing_max_rows(10, 3, 4, MOEGRAD_NO_LIMIT, MOEGRAD_NO_LIMIT, &rows), MOEGRAD_STATUS_SUCCESS);
  EXPECT_EQ(rows, 30);
  ASSERT_EQ(moegrad_moe_init_routing_max_rows(10, 3, 4, 12, MOEGRAD_NO_LIMIT, &rows), MOEGRAD_STATUS_SUCCESS);
  EXPECT_EQ(rows, 12);
  ASSERT_EQ(moegrad_moe_init_routing_max_rows(10, 3, 4, 25, 5, &rows), MOEGRAD_STATUS_SUCCESS);
  EXPECT_EQ(rows, 20);
  ASSERT_EQ(moegrad_moe_init_routing_max_rows(10, 3, 4, MOEGRAD_NO_LIMIT, 0, &rows), MOEGRAD_STATUS_SUCCESS);
  EXPECT_EQ(rows, 0);
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(10, 3, 4, -2, 1, &rows), MOEGRAD_STATUS_BAD_ACTIVE_NUM);
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(10, 3, 4, 1, -5, &rows), MOEGRAD_STATUS_BAD_CAPACITY);
  // Its messages name its own arguments, not the operator's tensors.
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(0, 3, 4, 1, 1, &rows), MOEGRAD_STATUS_BAD_BATCH);
  EXPECT_STREQ(moegrad_last_error_message(), "batch=0 must be > 0");
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(1, 0, 4, 1, 1, &rows), MOEGRAD_STATUS_BAD_TOP_K);
  EXPECT_STREQ(moegrad_last_error_message(), "top_k=0 must be > 0");
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(1, 1, 0, 1, 1, &rows), MOEGRAD_STATUS_EMPTY_DIMENSION);
  EXPECT_STREQ(moegrad_last_error_message(), "num_experts=0 must be >= 1");
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(INT64_MAX, 2, 1, 1, 1, &rows), MOEGRAD_STATUS_SIZE_OVERFLOW);
  // Sizes no tensor the operator takes may have, though R itself fits.
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(int64_t{1} << 40, 1, int64_t{1} << 40, 5, MOEGRAD_NO_LIMIT, &rows),
            MOEGRAD_STATUS_SIZE_OVERFLOW);
  EXPECT_STREQ(moegrad_last_error_message(), "batch=1099511627776 exceeds 2^31-1, a dimension's limit");
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(3, int64_t{1} << 40, 1, 5, MOEGRAD_NO_LIMIT, &rows),
            MOEGRAD_STATUS_SIZE_OVERFLOW);
  EXPECT_STREQ(moegrad_last_error_message(), "top_k=1099511627776 exceeds 2^31-1, a dimension's limit");
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(3, 1, int64_t{1} << 31, MOEGRAD_NO_LIMIT, 1, &rows),
            MOEGRAD_STATUS_SIZE_OVERFLOW);
  EXPECT_STREQ(moegrad_last_error_message(), "num_experts=2147483648 exceeds 2^31-1, a dimension's limit");
  // R is a dimension of expanded_x: at most 2^31 - 1, whatever limits it.
  rows = -1;
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(int64_t{1} << 30, 2, 4, MOEGRAD_NO_LIMIT, MOEGRAD_NO_LIMIT, &rows),
            MOEGRAD_STATUS_SIZE_OVERFLOW);
  EXPECT_EQ(rows, -1);
  ASSERT_EQ(moegrad_moe_init_routing_max_rows(int64_t{1} << 30, 2, 4, (int64_t{1} << 31) - 1, MOEGRAD_NO_LIMIT, &rows),
            MOEGRAD_STATUS_SUCCESS);
  EXPECT_EQ(rows, (int64_t{1} << 31) - 1);
  ASSERT_EQ(moegrad_moe_init_routing_max_rows(int64_t{1} << 30, 2, 4, MOEGRAD_NO_LIMIT, 1000, &rows),
            MOEGRAD_STATUS_SUCCESS);
  EXPECT_EQ(rows, 4000);
  EXPECT_EQ(moegrad_moe_init_routing_max_rows(1, 1, 1, 1, 1, nullptr), MOEGRAD_STATUS_NULL_POINTER);
  // It validates like planning, and clears the last message as planning does.
  EXPECT_STRNE(moegrad_last_error_message(), "");
  ASSERT_EQ(moegrad_moe_init_routing_max_rows(10, 3, 4, 12, MOEGRAD_NO_LIMIT, &rows), MOEGRAD_STATUS_SUCCESS);
  EXPECT_STREQ(moegrad_last_error_message(), "");
}

}  // namespace
}  // namespace mgt::ops
