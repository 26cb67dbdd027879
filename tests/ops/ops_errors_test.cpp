// Every refusal of the layer operators: the documented status, a one-line
// message naming the problem, and outputs left untouched (pre-filled with a
// NaN sentinel), in the plan phase, the run phase (contents) and one-shot.
#include <moegrad/moegrad_layer.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>

#include "ops_support.h"

namespace mgt::ops {
namespace {

// Owns replacement shapes/strides that mutated DLTensors point at.
struct ShapeStore {
  std::deque<std::vector<int64_t>> store;
  void reshape(DLTensor& t, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
    store.push_back(std::move(shape));
    t.shape = store.back().data();
    t.ndim = static_cast<int32_t>(store.back().size());
    if (strides.empty()) {
      t.strides = nullptr;
    } else {
      store.push_back(std::move(strides));
      t.strides = store.back().data();
    }
  }
};

struct RoutingFx : ShapeStore {
  HostTensor x = float_tensor(DType::kF32, {4, 3}, Fill::kSmallInt, 1);
  HostTensor e = index_tensor(IndexDType::kI64, {4, 2}, {0, 1, 2, 0, 1, 1, 2, 0});
  HostTensor ex = output_tensor(kDLF32, {8, 3});
  HostTensor idx = output_tensor(dl_type(IndexDType::kI64), {8});
  HostTensor gl = output_tensor(dl_type(IndexDType::kI32), {3});
  DLTensor tx = x.view(), te = e.view(), tex = ex.view(), tidx = idx.view(), tgl = gl.view();
  int64_t rows = 0;
  moegrad_moe_init_routing_args args{&tx, &te, &tex, &tidx, &tgl, MOEGRAD_NO_LIMIT, MOEGRAD_NO_LIMIT, 0, &rows};
  std::vector<const HostTensor*> outputs() const { return {&ex, &idx, &gl}; }
};

struct MatmulFx : ShapeStore {
  HostTensor x = float_tensor(DType::kBF16, {6, 4}, Fill::kSmallInt, 1);
  HostTensor w = float_tensor(DType::kBF16, {3, 4, 5}, Fill::kSmallInt, 2);
  HostTensor gl = index_tensor(IndexDType::kI64, {3}, {2, 0, 4});
  HostTensor y = output_tensor(kDLF32, {6, 5});
  DLTensor tx = x.view(), tw = w.view(), tgl = gl.view(), ty = y.view();
  moegrad_grouped_matmul_args args{&tx, &tw, &tgl, &ty, MOEGRAD_GROUP_LIST_COUNT};
  std::vector<const HostTensor*> outputs() const { return {&y}; }
};

struct WeightGradFx : ShapeStore {
  HostTensor x = float_tensor(DType::kF16, {6, 4}, Fill::kSmallInt, 1);
  HostTensor gy = float_tensor(DType::kF16, {6, 5}, Fill::kSmallInt, 2);
  HostTensor gl = index_tensor(IndexDType::kI32, {3}, {2, 0, 4});
  HostTensor gw = output_tensor(kDLF32, {3, 4, 5});
  DLTensor tx = x.view(), tgy = gy.view(), tgl = gl.view(), tgw = gw.view();
  moegrad_grouped_matmul_weight_grad_args args{&tx, &tgy, &tgl, &tgw, MOEGRAD_GROUP_LIST_COUNT, 0};
  std::vector<const HostTensor*> outputs() const { return {&gw}; }
};

struct ScatterFx : ShapeStore {
  HostTensor d = float_tensor(DType::kF32, {5, 3}, Fill::kSmallInt, 1);
  HostTensor idx = index_tensor(IndexDType::kI64, {5}, {0, 3, -1, 1, 5});
  HostTensor gx = output_tensor(kDLF32, {3, 3});
  DLTensor td = d.view(), tidx = idx.view(), tgx = gx.view();
  moegrad_moe_init_routing_grad_args args{&td, &tidx, &tgx, 3, 2, 0};
  std::vector<const HostTensor*> outputs() const { return {&gx}; }
};

template <typename Fx>
struct ErrorCase {
  const char* name;
  std::function<void(Fx&)> mutate;
  moegrad_status status;
  const char* phase;    // "plan" (shape/attribute checks) or "run" (contents)
  const char* mention;  // a substring the message must contain
};

template <typename Fx>
void check_cases(const std::vector<ErrorCase<Fx>>& cases) {
  for (const auto& c : cases) {
    for (bool one_shot : {false, true}) {
      Fx fx;
      c.mutate(fx);
      const Outcome out = call(fx.args, nullptr, one_shot);
      const std::string what = std::string(c.name) + (one_shot ? " (one-shot)" : "");
      EXPECT_EQ(out.status, c.status) << what << ": got " << out.describe();
      if (!one_shot) {
        EXPECT_EQ(out.phase, c.phase) << what;
      }
      EXPECT_FALSE(out.message.empty()) << what;
      EXPECT_EQ(out.message.find('\n'), std::string::npos) << what << ": " << out.message;
      EXPECT_NE(out.message.find(c.mention), std::string::npos) << what << ": '" << out.message << "' lacks '"
                                                                << c.mention << "'";
      for (const HostTensor* t : fx.outputs()) EXPECT_TRUE(t->all_sentinel()) << what << ": an output was written";
    }
  }
}

TEST(OpsErrors, ValidFixturesSucceed) {
  {
    RoutingFx fx;
    EXPECT_TRUE(call(fx.args, nullptr).ok());
  }
  {
    MatmulFx fx;
    EXPECT_TRUE(call(fx.args, nullptr).ok());
  }
  {
    WeightGradFx fx;
    EXPECT_TRUE(call(fx.args, nullptr).ok());
  }
  {
    ScatterFx fx;
    EXPECT_TRUE(call(fx.args, nullptr).ok());
  }
}

TEST(OpsErrors, MoeInitRouting) {
  using Fx = RoutingFx;
  check_cases<Fx>({
      {"x NULL", [](Fx& f) { f.args.x = nullptr; }, MOEGRAD_STATUS_NULL_POINTER, "plan", "x: tensor pointer is NULL"},
      {"x data NULL", [](Fx& f) { f.tx.data = nullptr; }, MOEGRAD_STATUS_NULL_POINTER, "plan", "x: data is NULL"},
      {"group_list NULL", [](Fx& f) { f.args.group_list = nullptr; }, MOEGRAD_STATUS_NULL_POINTER, "plan", "group_list"},
      {"x 3-D", [](Fx& f) { f.reshape(f.tx, {4, 3, 1}); }, MOEGRAD_STATUS_BAD_RANK, "plan", "x must be 2-D"},
      {"x float64", [](Fx& f) { f.tx.dtype = {kDLFloat, 64, 1}; }, MOEGRAD_STATUS_BAD_DTYPE, "plan", "x: dtype float64"},
      {"x on CUDA", [](Fx& f) { f.tx.device = {kDLCUDA, 0}; }, MOEGRAD_STATUS_UNSUPPORTED_DEVICE, "plan", "x: device_type 2"},
      {"x two lanes", [](Fx& f) { f.tx.dtype.lanes = 2; }, MOEGRAD_STATUS_BAD_LAYOUT, "plan", "lanes"},
      {"expert_idx float", [](Fx& f) { f.te.dtype = kDLF32; }, MOEGRAD_STATUS_BAD_DTYPE, "plan", "expert_idx"},
      {"expanded_x f16", [](Fx& f) { f.tex.dtype = {kDLFloat, 16, 1}; }, MOEGRAD_STATUS_DTYPE_MISMATCH, "plan",
       "expanded_x"},
      {"batch mismatch", [](Fx& f) { f.reshape(f.te, {3, 2}); }, MOEGRAD_STATUS_BATCH_MISMATCH, "plan", "expert_idx"},
      {"batch 0", [](Fx& f) { f.reshape(f.tx, {0, 3}); f.reshape(f.te, {0, 2}); }, MOEGRAD_STATUS_BAD_BATCH, "plan",
       "batch"},
      {"top_k 0", [](Fx& f) { f.reshape(f.te, {4, 0}); }, MOEGRAD_STATUS_BAD_TOP_K, "plan", "top_k"},
      {"K 0", [](Fx& f) { f.reshape(f.tx, {4, 0}); }, MOEGRAD_STATUS_EMPTY_DIMENSION, "plan", "K"},
      {"G 0", [](Fx& f) { f.reshape(f.tgl, {0}); }, MOEGRAD_STATUS_EMPTY_DIMENSION, "plan", "G"},
      {"active_num -2", [](Fx& f) { f.args.active_num = -2; }, MOEGRAD_STATUS_BAD_ACTIVE_NUM, "plan", "active_num"},
      {"capacity -3", [](Fx& f) { f.args.capacity = -3; }, MOEGRAD_STATUS_BAD_CAPACITY, "plan", "capacity"},
      {"row_idx_type 2", [](Fx& f) { f.args.row_idx_type = 2; }, MOEGRAD_STATUS_BAD_ROW_IDX_TYPE, "plan",
       "row_idx_type"},
      {"expanded_x rows", [](Fx& f) { f.reshape(f.tex, {7, 3}); }, MOEGRAD_STATUS_OUTPUT_SHAPE, "plan", "expanded_x"},
      {"expanded_x rows vs capacity", [](Fx& f) { f.args.capacity = 2; }, MOEGRAD_STATUS_OUTPUT_SHAPE, "plan",
       "expanded_x"},
      {"index length, type 1", [](Fx& f) { f.args.row_idx_type = 1; f.reshape(f.tidx, {7}); },
       MOEGRAD_STATUS_OUTPUT_SHAPE, "plan", "expanded_row_idx"},
      {"expanded_x rows overlap", [](Fx& f) { f.reshape(f.tex, {8, 3}, {0, 1}); }, MOEGRAD_STATUS_BAD_LAYOUT, "plan",
       "expanded_x"},
      {"index overlaps itself", [](Fx& f) { f.reshape(f.tidx, {8}, {0}); }, MOEGRAD_STATUS_BAD_LAYOUT, "plan",
       "expanded_row_idx"},
      {"expanded_x rows overlap diagonally", [](Fx& f) { f.reshape(f.tex, {8, 3}, {1, 1}); },
       MOEGRAD_STATUS_BAD_LAYOUT, "plan", "expanded_x"},
      {"expanded_x inside x", [](Fx& f) { f.tex.data = f.tx.data; }, MOEGRAD_STATUS_ALIASING, "plan",
       "overlaps the address range of x ("},
      {"group_list inside expanded_row_idx", [](Fx& f) { f.tgl.data = f.tidx.data; f.tgl.dtype = f.tidx.dtype; },
       MOEGRAD_STATUS_ALIASING, "plan", "overlaps the address range"},
      // num_rows is an output too: written before the rows are gathered from x.
      {"num_rows inside x", [](Fx& f) { f.args.num_rows = static_cast<int64_t*>(f.tx.data); },
       MOEGRAD_STATUS_ALIASING, "plan", "num_rows (bytes"},
      {"num_rows inside expert_idx", [](Fx& f) { f.args.num_rows = static_cast<int64_t*>(f.te.data) + 1; },
       MOEGRAD_STATUS_ALIASING, "plan", "address range of expert_idx"},
      {"num_rows inside group_list", [](Fx& f) { f.args.num_rows = static_cast<int64_t*>(f.tgl.data); },
       MOEGRAD_STATUS_ALIASING, "plan", "address range of group_list"},
      // 2^30 tokens x top-4 (broadcast views: planning reads no element):
      // type 0 positions reach 2^32 - 1, past int32, though R is 8.
      {"int32 index, positions past 2^31", [](Fx& f) {
         f.reshape(f.tx, {int64_t{1} << 30, 3}, {0, 1});
         f.reshape(f.te, {int64_t{1} << 30, 4}, {0, 0});
         f.args.active_num = 8;
         f.tidx.dtype = {kDLInt, 32, 1};
       }, MOEGRAD_STATUS_SIZE_OVERFLOW, "plan", "use int64"},
      // 2^30 tokens x top-2 with no limit: R = 2^31 rows, one more than a
      // dimension may have, so no expanded_x could be passed.
      {"R past 2^31 - 1", [](Fx& f) {
         f.reshape(f.tx, {int64_t{1} << 30, 3}, {0, 1});
         f.reshape(f.te, {int64_t{1} << 30, 2}, {0, 0});
       }, MOEGRAD_STATUS_SIZE_OVERFLOW, "plan", "= 2147483648 rows"},
      // The same with R limited to 8: type 1's index would still need
      // batch*top_k = 2^31 elements.
      {"type 1 index past 2^31 - 1", [](Fx& f) {
         f.reshape(f.tx, {int64_t{1} << 30, 3}, {0, 1});
         f.reshape(f.te, {int64_t{1} << 30, 2}, {0, 0});
         f.args.active_num = 8;
         f.args.row_idx_type = 1;
       }, MOEGRAD_STATUS_SIZE_OVERFLOW, "plan", "batch*top_k=2147483648 elements"},
      {"expert 3 of 3", [](Fx& f) { f.e.set_index(f.e.offset({2, 1}), 3); }, MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE, "run",
       "expert_idx[2, 1]=3"},
      {"expert -1", [](Fx& f) { f.e.set_index(f.e.offset({3, 0}), -1); }, MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE, "run",
       "expert_idx[3, 0]=-1"},
  });
}

TEST(OpsErrors, GroupedMatmul) {
  using Fx = MatmulFx;
  check_cases<Fx>({
      {"y NULL", [](Fx& f) { f.args.y = nullptr; }, MOEGRAD_STATUS_NULL_POINTER, "plan", "y: tensor pointer is NULL"},
      {"weight f16", [](Fx& f) { f.tw.dtype = {kDLFloat, 16, 1}; }, MOEGRAD_STATUS_DTYPE_MISMATCH, "plan", "weight"},
      {"y f16 for bf16 x", [](Fx& f) { f.ty.dtype = {kDLFloat, 16, 1}; }, MOEGRAD_STATUS_BAD_DTYPE, "plan", "y is float16"},
      {"group_list f32", [](Fx& f) { f.tgl.dtype = kDLF32; }, MOEGRAD_STATUS_BAD_DTYPE, "plan", "group_list"},
      {"weight 2-D", [](Fx& f) { f.reshape(f.tw, {3, 4}); }, MOEGRAD_STATUS_BAD_RANK, "plan", "weight"},
      {"K mismatch", [](Fx& f) { f.reshape(f.tw, {3, 3, 5}); }, MOEGRAD_STATUS_K_MISMATCH, "plan", "weight.shape[1]"},
      {"G mismatch", [](Fx& f) { f.reshape(f.tgl, {2}); }, MOEGRAD_STATUS_GROUP_COUNT_MISMATCH, "plan", "group_list"},
      {"N 0", [](Fx& f) { f.reshape(f.tw, {3, 4, 0}); f.reshape(f.ty, {6, 0}); }, MOEGRAD_STATUS_EMPTY_DIMENSION,
       "plan", "N=0"},
      {"y shape", [](Fx& f) { f.reshape(f.ty, {6, 4}); }, MOEGRAD_STATUS_OUTPUT_SHAPE, "plan", "y.shape"},
      {"group_list_type 2", [](Fx& f) { f.args.group_list_type = 2; }, MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE, "plan",
       "group_list_type"},
      {"y negative stride", [](Fx& f) { f.reshape(f.ty, {6, 5}, {5, -1}); }, MOEGRAD_STATUS_BAD_LAYOUT, "plan",
       "y: stride[1]=-1 is not positive"},
      {"y aliases weight", [](Fx& f) { f.ty.data = f.tw.data; f.ty.dtype = f.tw.dtype; f.reshape(f.ty, {6, 5}); },
       MOEGRAD_STATUS_ALIASING, "plan", "weight"},
      {"negative count", [](Fx& f) { f.gl.set_index(f.gl.offset({1}), -1); }, MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT,
       "run", "group_list[1]=-1"},
      {"counts sum 5", [](Fx& f) { f.gl.set_index(f.gl.offset({2}), 3); }, MOEGRAD_STATUS_GROUP_SUM_MISMATCH, "run",
       "x rows"},
      {"counts exceed", [](Fx& f) { f.gl.set_index(f.gl.offset({0}), 7); }, MOEGRAD_STATUS_GROUP_SUM_MISMATCH, "run",
       "exceed"},
      {"cumsum decreasing", [](Fx& f) { f.args.group_list_type = MOEGRAD_GROUP_LIST_CUMSUM; },
       MOEGRAD_STATUS_CUMSUM_DECREASING, "run", "cumsum"},
  });
}

TEST(OpsErrors, GroupedMatmulWeightGrad) {
  using Fx = WeightGradFx;
  check_cases<Fx>({
      {"grad_weight NULL", [](Fx& f) { f.args.grad_weight = nullptr; }, MOEGRAD_STATUS_NULL_POINTER, "plan",
       "grad_weight"},
      {"grad_y bf16", [](Fx& f) { f.tgy.dtype = {kDLBfloat, 16, 1}; }, MOEGRAD_STATUS_DTYPE_MISMATCH, "plan", "grad_y"},
      {"grad_weight bf16", [](Fx& f) { f.tgw.dtype = {kDLBfloat, 16, 1}; }, MOEGRAD_STATUS_BAD_DTYPE, "plan",
       "grad_weight"},
      {"M mismatch", [](Fx& f) { f.reshape(f.tgy, {5, 5}); }, MOEGRAD_STATUS_M_MISMATCH, "plan", "grad_y.shape[0]"},
      {"K 0", [](Fx& f) { f.reshape(f.tx, {6, 0}); }, MOEGRAD_STATUS_EMPTY_DIMENSION, "plan", "K=0"},
      {"grad_weight shape", [](Fx& f) { f.reshape(f.tgw, {3, 5, 4}); }, MOEGRAD_STATUS_OUTPUT_SHAPE, "plan",
       "grad_weight.shape"},
      {"grad_weight G", [](Fx& f) { f.reshape(f.tgw, {2, 4, 5}); }, MOEGRAD_STATUS_OUTPUT_SHAPE, "plan",
       "grad_weight.shape"},
      {"accumulate 2", [](Fx& f) { f.args.accumulate = 2; }, MOEGRAD_STATUS_BAD_ACCUMULATE, "plan", "accumulate"},
      {"accumulate into f16", [](Fx& f) { f.args.accumulate = 1; f.tgw.dtype = {kDLFloat, 16, 1}; },
       MOEGRAD_STATUS_ACCUMULATE_NEEDS_F32, "plan", "float32"},
      {"grad_weight overlaps itself", [](Fx& f) { f.reshape(f.tgw, {3, 4, 5}, {20, 4, 1}); },
       MOEGRAD_STATUS_BAD_LAYOUT, "plan", "grad_weight"},
      {"grad_weight aliases x", [](Fx& f) { f.tgw.data = f.tx.data; }, MOEGRAD_STATUS_ALIASING, "plan", "overlaps the address range of x ("},
      {"negative count", [](Fx& f) { f.gl.set_index(f.gl.offset({0}), -2); }, MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT,
       "run", "negative"},
      {"counts sum 7", [](Fx& f) { f.gl.set_index(f.gl.offset({1}), 1); }, MOEGRAD_STATUS_GROUP_SUM_MISMATCH, "run",
       "M=6"},
  });
}

TEST(OpsErrors, MoeInitRoutingGrad) {
  using Fx = ScatterFx;
  check_cases<Fx>({
      {"grad_x NULL", [](Fx& f) { f.args.grad_x = nullptr; }, MOEGRAD_STATUS_NULL_POINTER, "plan", "grad_x"},
      {"grad_x f16", [](Fx& f) { f.tgx.dtype = {kDLFloat, 16, 1}; }, MOEGRAD_STATUS_BAD_DTYPE, "plan", "grad_x"},
      {"index 2-D", [](Fx& f) { f.reshape(f.tidx, {5, 1}); }, MOEGRAD_STATUS_BAD_RANK, "plan", "expanded_row_idx"},
      {"K 0", [](Fx& f) { f.reshape(f.td, {5, 0}); f.reshape(f.tgx, {3, 0}); }, MOEGRAD_STATUS_EMPTY_DIMENSION, "plan",
       "K=0"},
      {"batch 0", [](Fx& f) { f.args.batch = 0; }, MOEGRAD_STATUS_BAD_BATCH, "plan", "batch"},
      {"top_k 0", [](Fx& f) { f.args.top_k = 0; }, MOEGRAD_STATUS_BAD_TOP_K, "plan", "top_k"},
      {"row_idx_type -1", [](Fx& f) { f.args.row_idx_type = -1; }, MOEGRAD_STATUS_BAD_ROW_IDX_TYPE, "plan",
       "row_idx_type"},
      {"batch*top_k overflows", [](Fx& f) { f.args.batch = std::numeric_limits<int64_t>::max() / 2; f.args.top_k = 3; },
       MOEGRAD_STATUS_SIZE_OVERFLOW, "plan", "overflows"},
      {"grad_x shape", [](Fx& f) { f.reshape(f.tgx, {4, 3}); }, MOEGRAD_STATUS_GRAD_X_SHAPE, "plan", "grad_x.shape"},
      {"M > batch*top_k", [](Fx& f) { f.args.top_k = 1; f.reshape(f.tgx, {3, 3}); }, MOEGRAD_STATUS_M_EXCEEDS_SLOTS,
       "plan", "M=5"},
      {"type 0 index short", [](Fx& f) { f.reshape(f.tidx, {4}); }, MOEGRAD_STATUS_INDEX_TOO_SHORT, "plan", "L=4"},
      {"type 1 index long", [](Fx& f) { f.args.row_idx_type = 1; f.args.top_k = 1; f.args.batch = 3;
                                         f.reshape(f.td, {3, 3}); }, MOEGRAD_STATUS_INDEX_TOO_LONG, "plan", "L=5"},
      {"grad_x aliases grad_expanded_x", [](Fx& f) { f.tgx.data = f.td.data; }, MOEGRAD_STATUS_ALIASING, "plan",
       "grad_expanded_x"},
      {"index 6 of 6", [](Fx& f) { f.idx.set_index(f.idx.offset({1}), 6); }, MOEGRAD_STATUS_INDEX_OUT_OF_RANGE, "run",
       "expanded_row_idx[1]=6"},
      {"type 1 duplicate", [](Fx& f) { f.args.row_idx_type = 1; f.idx.set_index(f.idx.offset({4}), 0); },
       MOEGRAD_STATUS_DUPLICATE_INDEX, "run", "claimed twice"},
  });
}

TEST(OpsErrors, NullArgsAndOutputPointers) {
  size_t bytes = 0;
  moegrad_op_executor* ex = nullptr;
  EXPECT_EQ(moegrad_grouped_matmul_get_workspace_size(nullptr, nullptr, &bytes, &ex), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(ex, nullptr);
  EXPECT_EQ(moegrad_moe_init_routing_run(nullptr, nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_grouped_matmul_weight_grad_run(nullptr, nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_moe_init_routing_grad_run(nullptr, nullptr), MOEGRAD_STATUS_NULL_POINTER);
  MatmulFx fx;
  EXPECT_EQ(moegrad_grouped_matmul_get_workspace_size(&fx.args, nullptr, nullptr, &ex), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_grouped_matmul_get_workspace_size(&fx.args, nullptr, &bytes, nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_grouped_matmul(nullptr, 0, nullptr, nullptr), MOEGRAD_STATUS_NULL_POINTER);
  moegrad_op_executor_destroy(nullptr);  // a no-op
  EXPECT_TRUE(fx.y.all_sentinel());
}

using OpExecutorPtr = std::unique_ptr<moegrad_op_executor, void (*)(moegrad_op_executor*)>;

// fx's grouped matmul planned on the default context; null if planning failed.
OpExecutorPtr plan_matmul(MatmulFx& fx, size_t* bytes) {
  moegrad_op_executor* raw = nullptr;
  if (moegrad_grouped_matmul_get_workspace_size(&fx.args, nullptr, bytes, &raw) != MOEGRAD_STATUS_SUCCESS) raw = nullptr;
  return OpExecutorPtr(raw, moegrad_op_executor_destroy);
}

TEST(OpsErrors, ExecutorMisuse) {
  MatmulFx fx;
  size_t bytes = 0;
  const OpExecutorPtr ex = plan_matmul(fx, &bytes);
  ASSERT_NE(ex, nullptr) << moegrad_last_error_message();
  ASSERT_GT(bytes, 0u);
  std::vector<std::byte> ws(bytes);
  // Another operator's run function refuses it, and leaves it usable.
  EXPECT_EQ(moegrad_moe_init_routing(ws.data(), bytes, ex.get(), nullptr), MOEGRAD_STATUS_EXECUTOR_KIND);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("planned for grouped_matmul"), std::string::npos);
  EXPECT_EQ(moegrad_grouped_matmul_weight_grad(ws.data(), bytes, ex.get(), nullptr), MOEGRAD_STATUS_EXECUTOR_KIND);
  EXPECT_EQ(moegrad_grouped_matmul(ws.data(), bytes - 1, ex.get(), nullptr), MOEGRAD_STATUS_WORKSPACE_TOO_SMALL);
  EXPECT_EQ(moegrad_grouped_matmul(nullptr, bytes, ex.get(), nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_TRUE(fx.y.all_sentinel());
  ASSERT_EQ(moegrad_grouped_matmul(ws.data(), bytes, ex.get(), nullptr), MOEGRAD_STATUS_SUCCESS);
  EXPECT_STREQ(moegrad_last_error_message(), "");
  EXPECT_EQ(moegrad_grouped_matmul(ws.data(), bytes, ex.get(), nullptr), MOEGRAD_STATUS_EXECUTOR_USED);
}

// A run refused for its contents wrote nothing, so it does not use the
// executor up: with the contents repaired, the same executor runs, once.
TEST(OpsErrors, ARunRefusedForItsContentsLeavesTheExecutorUsable) {
  MatmulFx fx;
  size_t bytes = 0;
  const OpExecutorPtr ex = plan_matmul(fx, &bytes);
  ASSERT_NE(ex, nullptr) << moegrad_last_error_message();
  std::vector<std::byte> ws(bytes);
  fx.gl.set_index(fx.gl.offset({1}), 3);  // counts 2, 3, 4 sum to 9 > 6 rows
  EXPECT_EQ(moegrad_grouped_matmul(ws.data(), bytes, ex.get(), nullptr), MOEGRAD_STATUS_GROUP_SUM_MISMATCH);
  EXPECT_TRUE(fx.y.all_sentinel());
  fx.gl.set_index(fx.gl.offset({1}), 0);
  ASSERT_EQ(moegrad_grouped_matmul(ws.data(), bytes, ex.get(), nullptr), MOEGRAD_STATUS_SUCCESS)
      << moegrad_last_error_message();
  // Small integers: the float64 reference is exact.
  EXPECT_TRUE(within_bound(fx.y, reference_grouped_matmul(fx.x, fx.w, {2, 0, 4}), 0, 0.0, "the repaired run"));
  EXPECT_EQ(moegrad_grouped_matmul(ws.data(), bytes, ex.get(), nullptr), MOEGRAD_STATUS_EXECUTOR_USED);
}

// The run writes its workspace while it reads and writes the tensors, so it
// must share no byte with any of them. Each tensor of a grouped matmul, and
// moe_init_routing's num_rows, is moved into a buffer after a workspace-sized
// gap: a workspace whose last byte is the tensor's first is refused, naming
// it, with the buffer unchanged and the executor still usable; one byte
// earlier the same executor runs.
TEST(OpsErrors, AWorkspaceSharingAByteWithATensorIsRefused) {
  const char* names[] = {"x", "weight", "group_list", "y"};
  for (int t = 0; t < 4; ++t) {
    SCOPED_TRACE(names[t]);
    MatmulFx fx;
    DLTensor* tensors[] = {&fx.tx, &fx.tw, &fx.tgl, &fx.ty};
    const HostTensor* hosts[] = {&fx.x, &fx.w, &fx.gl, &fx.y};
    size_t bytes = 0;
    ASSERT_NE(plan_matmul(fx, &bytes), nullptr) << moegrad_last_error_message();
    ASSERT_GT(bytes, 0u);
    const size_t gap = (bytes + 63) / 64 * 64, size = hosts[t]->storage().size();
    std::vector<double> storage((gap + size) / sizeof(double) + 1, 0.0);
    auto* buffer = reinterpret_cast<unsigned char*>(storage.data());
    std::memcpy(buffer + gap, hosts[t]->storage().data(), size);
    tensors[t]->data = buffer + gap;
    unsigned char* first = buffer + gap + tensors[t]->byte_offset;  // positive strides: the first element
    const OpExecutorPtr ex = plan_matmul(fx, &bytes);  // over the moved tensor
    ASSERT_NE(ex, nullptr) << moegrad_last_error_message();
    const std::vector<double> before = storage;

    EXPECT_EQ(moegrad_grouped_matmul(first - bytes + 1, bytes, ex.get(), nullptr), MOEGRAD_STATUS_ALIASING);
    const std::string msg = moegrad_last_error_message();
    EXPECT_NE(msg.find("workspace"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("overlaps ") + names[t] + " "), std::string::npos) << msg;
    EXPECT_EQ(std::memcmp(before.data(), storage.data(), storage.size() * sizeof(double)), 0);
    EXPECT_TRUE(fx.y.all_sentinel());

    ASSERT_EQ(moegrad_grouped_matmul(first - bytes, bytes, ex.get(), nullptr), MOEGRAD_STATUS_SUCCESS)
        << moegrad_last_error_message();
    // A moved y was written in the buffer: its bytes go back into fx.y
    // (whose storage the buffer was copied from) to be read.
    if (t == 3) std::memcpy(const_cast<std::byte*>(fx.y.storage().data()), buffer + gap, size);
    // Small integers: the float64 reference is exact.
    EXPECT_TRUE(within_bound(fx.y, reference_grouped_matmul(fx.x, fx.w, {2, 0, 4}), 0, 0.0, "the adjacent run"));
  }

  RoutingFx fx;
  moegrad_op_executor* raw = nullptr;
  size_t bytes = 0;
  std::vector<double> storage(1, 0.0);
  ASSERT_EQ(moegrad_moe_init_routing_get_workspace_size(&fx.args, nullptr, &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
  moegrad_op_executor_destroy(raw);
  ASSERT_GT(bytes, 0u);
  storage.assign((bytes + 63) / 64 * 64 / sizeof(double) + 1, 0.0);
  auto* num_rows = reinterpret_cast<int64_t*>(storage.data() + storage.size() - 1);
  fx.args.num_rows = num_rows;
  ASSERT_EQ(moegrad_moe_init_routing_get_workspace_size(&fx.args, nullptr, &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
  const OpExecutorPtr ex(raw, moegrad_op_executor_destroy);
  auto* first = reinterpret_cast<unsigned char*>(num_rows);
  EXPECT_EQ(moegrad_moe_init_routing(first - bytes + 1, bytes, ex.get(), nullptr), MOEGRAD_STATUS_ALIASING);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("overlaps num_rows"), std::string::npos)
      << moegrad_last_error_message();
  for (const HostTensor* t : fx.outputs()) EXPECT_TRUE(t->all_sentinel());
  EXPECT_EQ(*num_rows, 0);
  ASSERT_EQ(moegrad_moe_init_routing(first - bytes, bytes, ex.get(), nullptr), MOEGRAD_STATUS_SUCCESS)
      << moegrad_last_error_message();
  EXPECT_EQ(*num_rows, 8);  // 4 tokens x top-2, no limit
}

TEST(OpsErrors, C_PlusPlusLayerThrows) {
  MatmulFx fx;
  moegrad::Context ctx;
  fx.args.group_list_type = 7;
  try {
    moegrad::OpExecutor ex(fx.args, ctx);
    FAIL() << "planning should throw";
  } catch (const moegrad::Error& e) {
    EXPECT_EQ(e.status(), MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE);
    EXPECT_NE(std::string(e.what()).find("group_list_type=7"), std::string::npos);
  }
  fx.args.group_list_type = MOEGRAD_GROUP_LIST_COUNT;
  moegrad::OpExecutor ex(fx.args, ctx);
  std::vector<std::byte> ws(ex.workspace_bytes());
  ex.run(ws.data(), ws.size(), ctx);
  EXPECT_THROW(ex.run(ws.data(), ws.size(), ctx), moegrad::Error);
  EXPECT_NO_THROW(moegrad::grouped_matmul(fx.args, ctx));
}

// Without a context, the C++ layer plans and runs on the library's default
// context (the C API's NULL): the same bits as a context of its own, y
// written by each call (refilled with the sentinel between them).
TEST(OpsErrors, C_PlusPlusWithoutAContextRunsOnTheDefaultContext) {
  MatmulFx fx;
  moegrad::grouped_matmul(fx.args, moegrad::Context());
  const std::vector<uint64_t> want = bit_values(fx.y);
  fx.y.fill_sentinel();
  moegrad::grouped_matmul(fx.args);
  EXPECT_EQ(bit_values(fx.y), want);
  fx.y.fill_sentinel();
  moegrad::OpExecutor ex(fx.args);
  std::vector<std::byte> ws(ex.workspace_bytes());
  ex.run(ws.data(), ws.size());
  EXPECT_EQ(bit_values(fx.y), want);
  const moegrad::Context none = moegrad::Context::default_context();
  EXPECT_EQ(none.get(), nullptr);
  fx.y.fill_sentinel();
  moegrad::grouped_matmul(fx.args, none);
  EXPECT_EQ(bit_values(fx.y), want);
}

// A moved-from OpExecutor holds no plan: no workspace, and its run throws
// NULL_POINTER without writing. Assignment used to swap, so the source went
// on to run the target's old plan (here a weight grad, into gw).
TEST(OpsErrors, C_PlusPlusAMovedFromExecutorHoldsNoPlan) {
  MatmulFx mm;
  WeightGradFx wg;
  moegrad::Context ctx;
  moegrad::OpExecutor forward(mm.args, ctx), weight_grad(wg.args, ctx);
  weight_grad = std::move(forward);
  EXPECT_EQ(forward.workspace_bytes(), 0u);  // NOLINT(bugprone-use-after-move)
  std::vector<std::byte> ws(std::max(weight_grad.workspace_bytes(), size_t{64}));
  try {
    forward.run(ws.data(), ws.size(), ctx);  // NOLINT(bugprone-use-after-move)
    ADD_FAILURE() << "a moved-from executor ran";
  } catch (const moegrad::Error& e) {
    EXPECT_EQ(e.status(), MOEGRAD_STATUS_NULL_POINTER) << e.what();
  }
  EXPECT_TRUE(wg.gw.all_sentinel()) << "the weight grad's plan, released by the move, ran";
  EXPECT_TRUE(mm.y.all_sentinel());
  weight_grad.run(ws.data(), ws.size(), ctx);  // the forward's plan
  EXPECT_FALSE(mm.y.all_sentinel());
  EXPECT_TRUE(wg.gw.all_sentinel());
  moegrad::OpExecutor moved(std::move(weight_grad));
  EXPECT_EQ(weight_grad.workspace_bytes(), 0u);  // NOLINT(bugprone-use-after-move)
}

TEST(OpsErrors, NewStatusStringsNameThemselves) {
  const std::pair<moegrad_status, const char*> statuses[] = {
      {MOEGRAD_STATUS_EXECUTOR_KIND, "MOEGRAD_STATUS_EXECUTOR_KIND:"},
      {MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE, "MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE:"},
      {MOEGRAD_STATUS_BAD_ACTIVE_NUM, "MOEGRAD_STATUS_BAD_ACTIVE_NUM:"},
      {MOEGRAD_STATUS_BAD_CAPACITY, "MOEGRAD_STATUS_BAD_CAPACITY:"},
      {MOEGRAD_STATUS_OUTPUT_SHAPE, "MOEGRAD_STATUS_OUTPUT_SHAPE:"},
      {MOEGRAD_STATUS_BATCH_MISMATCH, "MOEGRAD_STATUS_BATCH_MISMATCH:"},
      {MOEGRAD_STATUS_K_MISMATCH, "MOEGRAD_STATUS_K_MISMATCH:"},
      {MOEGRAD_STATUS_M_MISMATCH, "MOEGRAD_STATUS_M_MISMATCH:"},
      {MOEGRAD_STATUS_ACCUMULATE_NEEDS_F32, "MOEGRAD_STATUS_ACCUMULATE_NEEDS_F32:"},
      {MOEGRAD_STATUS_BAD_ACCUMULATE, "MOEGRAD_STATUS_BAD_ACCUMULATE:"},
      {MOEGRAD_STATUS_ALIASING, "MOEGRAD_STATUS_ALIASING:"},
  };
  for (const auto& [status, prefix] : statuses)
    EXPECT_EQ(std::strncmp(moegrad_status_string(status), prefix, std::strlen(prefix)), 0) << prefix;
}

}  // namespace
}  // namespace mgt::ops
