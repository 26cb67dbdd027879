// SPEC §4: every constraint has its own status, a one-line message naming
// the problem, and leaves grad_x byte-for-byte untouched. Content errors
// (group list, index values) are checked by moegrad_grad_x before any write,
// also when the contents change after planning.
#include <moegrad/moegrad.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "problem.h"
#include "reference.h"
#include "runner.h"

namespace mgt {
namespace {

// batch=11, top_k=3, G=4, K=23, N=37: M = 33 = batch*top_k = L.
ProblemSpec base_spec(int32_t row_idx_type = 0, IndexDType index_dtype = IndexDType::kI64) {
  ProblemSpec s = make_spec({.batch = 11, .top_k = 3, .experts = 4, .K = 23, .N = 37}, row_idx_type, 1.0, 4);
  s.idx_dtype = index_dtype;
  s.group_list_dtype = index_dtype;
  s.values = Values::kSmallInt;
  return s;
}

// All experts empty: M = 0, L = 0 (type 0).
ProblemSpec empty_spec() {
  ProblemSpec s = base_spec(0);
  s.routing.keep_ratio = 0.0;
  return s;
}

std::string quoted(const std::vector<std::string>& needles) {
  std::string out;
  for (const auto& n : needles) out += (out.empty() ? "\"" : ", \"") + n + "\"";
  return out;
}

// The call fails with `want` both as two phases (at planning when
// `at_plan`) and as the one-shot call; the message contains every needle;
// grad_x is untouched.
void expect_failure(const moegrad_grad_x_args& args, HostTensor& grad_x, moegrad_status want,
                    const std::vector<std::string>& needles, bool at_plan = true) {
  for (bool one_shot : {false, true}) {
    SCOPED_TRACE(one_shot ? "one-shot moegrad_grad_x_run" : "two phases");
    grad_x.fill_sentinel();
    RunOptions o;
    o.one_shot = one_shot;
    const Outcome out = run_call(args, o);
    EXPECT_EQ(out.status, want) << "want " << moegrad_status_string(want) << ", got " << out.describe();
    if (!one_shot && at_plan) {
      EXPECT_EQ(out.phase, "plan") << "shape/dtype/attribute errors are found by planning";
    }
    EXPECT_FALSE(out.message.empty()) << "no error message";
    EXPECT_EQ(out.message.find('\n'), std::string::npos) << "message is not one line: " << out.message;
    for (const auto& n : needles)
      EXPECT_NE(out.message.find(n), std::string::npos)
          << "message \"" << out.message << "\" should name " << quoted(needles);
    EXPECT_TRUE(grad_x.all_sentinel()) << "grad_x was written by a failing call";
  }
}

// A Call on a problem plus its own grad_x.
struct Fixture {
  explicit Fixture(const ProblemSpec& s) : p(s), grad_x(p.make_grad_x()), call(p, grad_x) {}
  Problem p;
  HostTensor grad_x;
  Call call;
};

// ---- §4.9 and API misuse ---------------------------------------------------------

TEST(Errors, NullArgumentPointers) {
  Fixture f(base_spec());
  auto ctx = make_context();
  size_t ws = 0;
  moegrad_executor* ex = nullptr;
  EXPECT_EQ(moegrad_grad_x_get_workspace_size(nullptr, ctx.get(), &ws, &ex), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("args"), std::string::npos) << moegrad_last_error_message();
  EXPECT_EQ(moegrad_grad_x_get_workspace_size(&f.call.args, ctx.get(), nullptr, &ex), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("workspace"), std::string::npos) << moegrad_last_error_message();
  EXPECT_EQ(moegrad_grad_x_get_workspace_size(&f.call.args, ctx.get(), &ws, nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("executor"), std::string::npos) << moegrad_last_error_message();
  EXPECT_EQ(moegrad_grad_x(nullptr, 0, nullptr, ctx.get()), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("executor"), std::string::npos) << moegrad_last_error_message();
  EXPECT_EQ(moegrad_grad_x_run(nullptr, ctx.get()), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("args"), std::string::npos) << moegrad_last_error_message();
  EXPECT_TRUE(f.grad_x.all_sentinel());
}

TEST(Errors, NullTensor) {
  const char* names[] = {"grad_y", "weight", "expanded_row_idx", "group_list", "grad_x"};
  for (int t = 0; t < 5; ++t) {
    SCOPED_TRACE(names[t]);
    Fixture f(base_spec());
    const DLTensor** slot[] = {&f.call.args.grad_y, &f.call.args.weight, &f.call.args.expanded_row_idx,
                               &f.call.args.group_list, &f.call.args.grad_x};
    *slot[t] = nullptr;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_NULL_POINTER, {names[t]});
  }
}

TEST(Errors, NullTensorData) {
  const char* names[] = {"grad_y", "weight", "expanded_row_idx", "group_list", "grad_x"};
  for (int t = 0; t < 5; ++t) {
    SCOPED_TRACE(names[t]);
    Fixture f(base_spec());
    DLTensor* tensors[] = {&f.call.grad_y, &f.call.weight, &f.call.idx, &f.call.group_list, &f.call.grad_x};
    tensors[t]->data = nullptr;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_NULL_POINTER, {names[t]});
  }
}

// Plans f on a default context; returns the executor and the workspace size.
ExecutorPtr plan(Fixture& f, const moegrad_context* ctx, size_t* ws) {
  moegrad_executor* raw = nullptr;
  const moegrad_status s = moegrad_grad_x_get_workspace_size(&f.call.args, ctx, ws, &raw);
  EXPECT_EQ(s, MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
  return ExecutorPtr(raw);
}

// A successful plan always asks for a workspace (moegrad.h: "never 0 after
// a success in this version").
TEST(Errors, WorkspaceNullOrTooSmall) {
  auto ctx = make_context();
  Fixture f(base_spec(1));
  size_t ws = 0;
  ExecutorPtr ex = plan(f, ctx.get(), &ws);
  ASSERT_GT(ws, 0u);
  std::vector<unsigned char> buffer(ws);

  EXPECT_EQ(moegrad_grad_x(nullptr, ws, ex.get(), ctx.get()), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("workspace"), std::string::npos) << moegrad_last_error_message();
  EXPECT_TRUE(f.grad_x.all_sentinel());

  EXPECT_EQ(moegrad_grad_x(buffer.data(), ws - 1, ex.get(), ctx.get()), MOEGRAD_STATUS_WORKSPACE_TOO_SMALL);
  const std::string msg = moegrad_last_error_message();
  EXPECT_NE(msg.find(std::to_string(ws - 1)), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(ws)), std::string::npos) << msg;
  EXPECT_TRUE(f.grad_x.all_sentinel());
  EXPECT_EQ(moegrad_grad_x(buffer.data(), 0, ex.get(), ctx.get()), MOEGRAD_STATUS_WORKSPACE_TOO_SMALL);
  EXPECT_TRUE(f.grad_x.all_sentinel());

  // The refused attempts did not use the executor up.
  EXPECT_EQ(moegrad_grad_x(buffer.data(), ws, ex.get(), ctx.get()), MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
  EXPECT_TRUE(bitwise_equal(read_matrix_f32(f.grad_x), reference_contract_order(f.p), f.p.K, f.p.describe()));
}

TEST(Errors, ExecutorUsedTwice) {
  auto ctx = make_context();
  for (int32_t type : {0, 1}) {
    Fixture f(base_spec(type));
    size_t ws = 0;
    ExecutorPtr ex = plan(f, ctx.get(), &ws);
    std::vector<unsigned char> buffer(ws + 1);
    ASSERT_EQ(moegrad_grad_x(buffer.data(), ws, ex.get(), ctx.get()), MOEGRAD_STATUS_SUCCESS)
        << moegrad_last_error_message();
    f.grad_x.fill_sentinel();
    EXPECT_EQ(moegrad_grad_x(buffer.data(), ws, ex.get(), ctx.get()), MOEGRAD_STATUS_EXECUTOR_USED);
    EXPECT_NE(std::string(moegrad_last_error_message()).find("executor"), std::string::npos)
        << moegrad_last_error_message();
    EXPECT_TRUE(f.grad_x.all_sentinel()) << "a used executor wrote grad_x";
  }
}

// ---- §4.1 - §4.4 shapes and dtypes -----------------------------------------------

TEST(Errors, BadRank) {
  const char* names[] = {"grad_y", "weight", "expanded_row_idx", "group_list", "grad_x"};
  for (int t = 0; t < 5; ++t) {
    SCOPED_TRACE(names[t]);
    Fixture f(base_spec());
    // One dimension more (or, for the 3-D weight, one less), same elements.
    std::vector<int64_t> shape;
    DLTensor* tensors[] = {&f.call.grad_y, &f.call.weight, &f.call.idx, &f.call.group_list, &f.call.grad_x};
    DLTensor& d = *tensors[t];
    if (t == 1) shape = {d.shape[0] * d.shape[1], d.shape[2]};
    else {
      shape.assign(d.shape, d.shape + d.ndim);
      shape.insert(shape.begin(), 1);
    }
    d.shape = shape.data();
    d.ndim = static_cast<int32_t>(shape.size());
    d.strides = nullptr;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_BAD_RANK,
                   {names[t], "ndim=" + std::to_string(shape.size())});
  }
}

// An edit that gives the `retyped` tensors dtype t and moves `moved`'s first
// element to an address that is not a multiple of `align` (by half of it);
// the call is refused before any read.
std::function<void(Call&)> retyped_misaligned(std::vector<DLTensor Call::*> retyped, DLTensor Call::*moved,
                                              DLDataType t, uint64_t align) {
  return [=](Call& c) {
    for (DLTensor Call::*tensor : retyped) (c.*tensor).dtype = t;
    DLTensor& m = c.*moved;
    if ((reinterpret_cast<uintptr_t>(m.data) + m.byte_offset) % align == 0) m.byte_offset += align / 2;
  };
}

TEST(Errors, BadDtype) {
  struct Case {
    const char* name;
    std::function<void(Call&)> edit;
    const char* tensor;
    const char* dtype;  // as the message must name it
  };
  const Case cases[] = {
      {"grad_y and weight f64", [](Call& c) { c.grad_y.dtype = c.weight.dtype = dl_type(kDLFloat, 64); }, "grad_y",
       "dtype float64 must be"},
      {"grad_y and weight int32", [](Call& c) { c.grad_y.dtype = c.weight.dtype = dl_type(kDLInt, 32); }, "grad_y",
       "dtype int32 must be"},
      {"bf16 with 32 bits", [](Call& c) { c.grad_y.dtype = c.weight.dtype = dl_type(kDLBfloat, 32); }, "grad_y",
       "dtype bfloat32 must be"},
      {"weight complex64", [](Call& c) { c.weight.dtype = dl_type(kDLComplex, 64); }, "weight",
       "dtype complex64 must be"},
      {"grad_x f16", [](Call& c) { c.grad_x.dtype = dl_type(kDLFloat, 16); }, "grad_x", "dtype float16 must be"},
      {"grad_x f64", [](Call& c) { c.grad_x.dtype = dl_type(kDLFloat, 64); }, "grad_x", "dtype float64 must be"},
      // At an address unaligned for the type, the dtype is still the one
      // rule broken: alignment is checked only for types the tensor may have.
      {"grad_y and weight f64, 4 bytes off an 8-byte boundary",
       retyped_misaligned({&Call::grad_y, &Call::weight}, &Call::grad_y, dl_type(kDLFloat, 64), 8), "grad_y",
       "dtype float64 must be"},
      {"grad_x complex64, 4 bytes off an 8-byte boundary",
       retyped_misaligned({&Call::grad_x}, &Call::grad_x, dl_type(kDLComplex, 64), 8), "grad_x",
       "dtype complex64 must be"},
      {"grad_y and weight int32, 2 bytes off a 4-byte boundary (an index type, not a float one)",
       retyped_misaligned({&Call::grad_y, &Call::weight}, &Call::weight, dl_type(kDLInt, 32), 4), "grad_y",
       "dtype int32 must be"},
      {"grad_x f16 at an odd address (grad_x is f32 only)",
       retyped_misaligned({&Call::grad_x}, &Call::grad_x, dl_type(kDLFloat, 16), 2), "grad_x",
       "dtype float16 must be"},
      {"group_list int16 at an odd address",
       retyped_misaligned({&Call::group_list}, &Call::group_list, dl_type(kDLInt, 16), 2), "group_list",
       "dtype int16 must be"},
      {"expanded_row_idx int16", [](Call& c) { c.idx.dtype = dl_type(kDLInt, 16); }, "expanded_row_idx",
       "dtype int16 must be"},
      {"expanded_row_idx uint64", [](Call& c) { c.idx.dtype = dl_type(kDLUInt, 64); }, "expanded_row_idx",
       "dtype uint64 must be"},
      {"expanded_row_idx f32", [](Call& c) { c.idx.dtype = dl_type(kDLFloat, 32); }, "expanded_row_idx",
       "dtype float32 must be"},
      {"group_list int8", [](Call& c) { c.group_list.dtype = dl_type(kDLInt, 8); }, "group_list", "dtype int8 must be"},
      {"group_list uint32", [](Call& c) { c.group_list.dtype = dl_type(kDLUInt, 32); }, "group_list",
       "dtype uint32 must be"},
      {"group_list bool (DLPack 0.8's code 6)", [](Call& c) { c.group_list.dtype = dl_type(6, 8); }, "group_list",
       "dtype bool must be"},
      {"group_list opaque handle", [](Call& c) { c.group_list.dtype = dl_type(kDLOpaqueHandle, 64); }, "group_list",
       "dtype (DLPack code 3, 64 bits) must be"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Fixture f(base_spec());
    c.edit(f.call);
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_BAD_DTYPE, {c.tensor, c.dtype});
  }
}

TEST(Errors, DtypeMismatch) {
  struct Case {
    DType gy, w;
    const char *gy_text, *w_text;  // as the message spells them
  };
  for (const Case& c : {Case{DType::kF32, DType::kF16, "grad_y is float32", "weight is float16"},
                        Case{DType::kF16, DType::kBF16, "grad_y is float16", "weight is bfloat16"},
                        Case{DType::kBF16, DType::kF32, "grad_y is bfloat16", "weight is float32"}}) {
    SCOPED_TRACE(std::string(dtype_name(c.gy)) + " vs " + dtype_name(c.w));
    ProblemSpec s = base_spec();
    s.dtype = c.gy;
    Fixture f(s);
    f.call.weight.dtype = dl_type(c.w);
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_DTYPE_MISMATCH, {c.gy_text, c.w_text});
  }
}

TEST(Errors, NMismatch) {
  Fixture f(base_spec());
  int64_t shape[] = {33, 38};
  f.call.grad_y.shape = shape;
  expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_N_MISMATCH, {"38", "37"});
}

TEST(Errors, GroupCountMismatch) {
  Fixture f(base_spec());
  int64_t shape[] = {5};
  f.call.group_list.shape = shape;
  expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_GROUP_COUNT_MISMATCH, {"group_list", "5"});
}

TEST(Errors, GradXShape) {
  for (auto [rows, cols, needle] : {std::tuple{12, 23, "12"}, std::tuple{11, 24, "24"}, std::tuple{10, 23, "10"}}) {
    SCOPED_TRACE(needle);
    Fixture f(base_spec());
    HostTensor wrong(kDLF32, {rows, cols});
    f.call.grad_x = wrong.view();
    expect_failure(f.call.args, wrong, MOEGRAD_STATUS_GRAD_X_SHAPE, {"grad_x", needle});
  }
}

TEST(Errors, EmptyDimension) {
  {
    SCOPED_TRACE("N = 0");
    Fixture f(base_spec());
    int64_t gy_shape[] = {33, 0};
    int64_t w_shape[] = {4, 23, 0};
    f.call.grad_y.shape = gy_shape;
    f.call.weight.shape = w_shape;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_EMPTY_DIMENSION, {"N=0", "K=23", "G=4"});
  }
  {
    SCOPED_TRACE("K = 0");
    Fixture f(base_spec());
    int64_t w_shape[] = {4, 0, 37};
    HostTensor gx(kDLF32, {11, 0});
    f.call.weight.shape = w_shape;
    f.call.grad_x = gx.view();
    expect_failure(f.call.args, gx, MOEGRAD_STATUS_EMPTY_DIMENSION, {"N=37", "K=0", "G=4"});
  }
  {
    SCOPED_TRACE("G = 0");
    Fixture f(empty_spec());  // M = 0 as well, so only G is wrong
    int64_t w_shape[] = {0, 23, 37};
    int64_t gl_shape[] = {0};
    f.call.weight.shape = w_shape;
    f.call.group_list.shape = gl_shape;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_EMPTY_DIMENSION, {"N=37", "K=23", "G=0"});
  }
}

// An empty tensor's data may be NULL (DLPack exporters give it so), with any
// byte_offset: nothing is read through it. The offset must still keep the
// elements aligned, as for any tensor.
TEST(Errors, EmptyTensorsMayHaveNullData) {
  Fixture f(empty_spec());  // M = 0: grad_y [0, N] and expanded_row_idx [0]
  f.call.grad_y.data = nullptr;
  f.call.grad_y.byte_offset = 4096;
  f.call.idx.data = nullptr;
  f.call.idx.byte_offset = 8 * 33;
  for (bool one_shot : {false, true}) {
    SCOPED_TRACE(one_shot ? "one-shot moegrad_grad_x_run" : "two phases");
    f.grad_x.fill_sentinel();
    RunOptions o;
    o.one_shot = one_shot;
    const Outcome out = run_call(f.call.args, o);
    ASSERT_TRUE(out.ok()) << out.describe();
    const Floats got = read_matrix_f32(f.grad_x);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return v == 0.0f && !std::signbit(v); }))
        << "M = 0: grad_x is all +0.0";
  }
  f.call.grad_y.byte_offset = 2;  // not a multiple of grad_y's 4-byte elements
  expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_BAD_LAYOUT, {"grad_y", "aligned"});
}

// ---- §4.5 attributes ------------------------------------------------------------

TEST(Errors, BadBatch) {
  for (int64_t batch : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    SCOPED_TRACE(batch);
    Fixture f(empty_spec());  // M = 0, so no other constraint depends on batch
    HostTensor gx(kDLF32, {0, 23});
    f.call.grad_x = gx.view();
    f.call.args.batch = batch;
    f.call.args.top_k = 1;  // batch*top_k does not overflow: the batch is the one error
    expect_failure(f.call.args, gx, MOEGRAD_STATUS_BAD_BATCH, {"batch=" + std::to_string(batch)});
  }
}

TEST(Errors, BadTopK) {
  for (int64_t top_k : {0, -2}) {
    SCOPED_TRACE(top_k);
    Fixture f(empty_spec());
    f.call.args.top_k = top_k;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_BAD_TOP_K, {"top_k", std::to_string(top_k)});
  }
}

TEST(Errors, BadRowIdxType) {
  for (int32_t type : {2, -1}) {
    SCOPED_TRACE(type);
    Fixture f(base_spec());
    f.call.args.row_idx_type = type;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_BAD_ROW_IDX_TYPE, {"row_idx_type", std::to_string(type)});
  }
}

TEST(Errors, BadGroupListType) {
  for (int32_t type : {2, -1}) {
    SCOPED_TRACE(type);
    Fixture f(base_spec());
    f.call.args.group_list_type = type;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE,
                   {"group_list_type", std::to_string(type)});
  }
}

TEST(Errors, SizeOverflow) {
  struct Case {
    int64_t batch, top_k;
  };
  // batch*top_k = 2^64 with batch itself a legal dimension; and 2^62 * 4.
  for (Case c : {Case{2147483647, int64_t{1} << 33}, Case{int64_t{1} << 62, 4}}) {
    SCOPED_TRACE(std::to_string(c.batch) + " * " + std::to_string(c.top_k));
    Fixture f(base_spec());
    int64_t gx_shape[] = {c.batch, 23};
    f.call.grad_x.shape = gx_shape;  // consistent with batch; never written
    f.call.args.batch = c.batch;
    f.call.args.top_k = c.top_k;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_SIZE_OVERFLOW, {std::to_string(c.batch)});
  }
}

// SPEC §4: dimensions up to 2^31-1 each, with 64-bit, overflow-checked
// offsets. The count of a tensor's elements is not an offset: a weight
// whose strides repeat one value ([2^16, 2^16 + 1, 2^31-1] with strides 0:
// more than 2^63 elements) counts more than int64 holds, yet every offset
// is 0. It is accepted; with no rows (every count 0) grad_x is all +0.0.
TEST(Errors, ABroadcastTensorOfMoreElementsThanInt64CountsIsAccepted) {
  constexpr int64_t kMax = 2147483647, G = int64_t{1} << 16, K = G + 1;
  float weight_value = 1.0f;
  int64_t group_count = 0, no_index = 0;
  int64_t w_shape[] = {G, K, kMax}, w_strides[] = {0, 0, 0};
  int64_t gy_shape[] = {0, kMax}, idx_shape[] = {0}, gl_shape[] = {G}, gl_strides[] = {0};
  std::vector<float> gy_storage(1), gx(2 * K, std::numeric_limits<float>::quiet_NaN());
  int64_t gx_shape[] = {2, K};
  constexpr DLDataType kF32{kDLFloat, 32, 1}, kI64{kDLInt, 64, 1};
  constexpr DLDevice kCpu{kDLCPU, 0};
  // Every field named (the warnings ask for all of them).
  const auto cpu_tensor = [&](void* data, DLDataType dtype, int32_t ndim, int64_t* shape, int64_t* strides) {
    return DLTensor{.data = data, .device = kCpu, .ndim = ndim, .dtype = dtype, .shape = shape, .strides = strides,
                    .byte_offset = 0};
  };
  DLTensor w = cpu_tensor(&weight_value, kF32, 3, w_shape, w_strides);
  DLTensor gy = cpu_tensor(gy_storage.data(), kF32, 2, gy_shape, nullptr);
  DLTensor idx = cpu_tensor(&no_index, kI64, 1, idx_shape, nullptr);
  DLTensor gl = cpu_tensor(&group_count, kI64, 1, gl_shape, gl_strides);
  DLTensor grad_x = cpu_tensor(gx.data(), kF32, 2, gx_shape, nullptr);
  const moegrad_grad_x_args args{&gy, &w, &idx, &gl, &grad_x, 2, 1, MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL,
                                 MOEGRAD_GROUP_LIST_COUNT};
  ASSERT_EQ(moegrad_grad_x_run(&args, nullptr), MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
  for (float v : gx) EXPECT_TRUE(v == 0.0f && !std::signbit(v)) << v;
}

// ---- §4.6 - §4.8 contents and lengths -------------------------------------------

// Content errors: invalid from the start (found by planning or the run), and
// invalid only after a valid plan (found by the run). grad_x untouched.
// Every element's bits, in row-major order, and back.
std::vector<uint64_t> element_bits(const HostTensor& t) {
  std::vector<uint64_t> bits(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) bits[static_cast<size_t>(i)] = t.get_bits(t.offset_of_linear(i));
  return bits;
}
void set_element_bits(HostTensor& t, const std::vector<uint64_t>& bits) {
  for (int64_t i = 0; i < t.numel(); ++i) t.set_bits(t.offset_of_linear(i), bits[static_cast<size_t>(i)]);
}

void expect_content_error(const ProblemSpec& spec, const std::function<void(Problem&)>& corrupt, moegrad_status want,
                          const std::vector<std::string>& needles) {
  {
    SCOPED_TRACE("invalid before planning");
    Fixture f(spec);
    corrupt(f.p);
    expect_failure(f.call.args, f.grad_x, want, needles, /*at_plan=*/false);
  }
  {
    SCOPED_TRACE("corrupted after a valid plan, then repaired");
    Fixture f(spec);
    auto ctx = make_context();
    size_t ws = 0;
    ExecutorPtr ex = plan(f, ctx.get(), &ws);
    ASSERT_NE(ex, nullptr);
    const std::vector<uint64_t> idx = element_bits(f.p.idx), counts = element_bits(f.p.group_list);
    corrupt(f.p);  // in place: the tensors' storage does not move
    std::vector<unsigned char> buffer(ws + 1);
    EXPECT_EQ(moegrad_grad_x(buffer.data(), ws, ex.get(), ctx.get()), want)
        << "want " << moegrad_status_string(want) << ", got \"" << moegrad_last_error_message() << "\"";
    EXPECT_TRUE(f.grad_x.all_sentinel()) << "grad_x was written by a failing run";
    // The failed run wrote nothing, so it did not use the executor up.
    set_element_bits(f.p.idx, idx);
    set_element_bits(f.p.group_list, counts);
    ASSERT_EQ(moegrad_grad_x(buffer.data(), ws, ex.get(), ctx.get()), MOEGRAD_STATUS_SUCCESS)
        << moegrad_last_error_message();
    EXPECT_TRUE(bitwise_equal(read_matrix_f32(f.grad_x), reference_contract_order(f.p), f.p.K, "repaired run"));
  }
}

// A corruption that stores the problem's group counts, edited, as counts.
std::function<void(Problem&)> edited_counts(std::function<void(std::vector<int64_t>&)> edit) {
  return [edit](Problem& p) {
    auto counts = p.routing.counts;
    edit(counts);
    store_group_list(p.group_list, counts, MOEGRAD_GROUP_LIST_COUNT);
  };
}

TEST(Errors, NegativeGroupCount) {
  for (IndexDType dtype : {IndexDType::kI64, IndexDType::kI32}) {
    SCOPED_TRACE(index_dtype_name(dtype));
    const auto corrupt = edited_counts([](std::vector<int64_t>& c) {
      c[2] += c[1] + 3;  // the sum stays M
      c[1] = -3;
    });
    expect_content_error(base_spec(0, dtype), corrupt, MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT, {"group_list", "-3"});
    // Running sums past M before the negative count brings the total back
    // to M: the sign is still the only rule broken.
    const auto past_m_first = edited_counts([](std::vector<int64_t>& c) {
      const int64_t m = std::accumulate(c.begin(), c.end(), int64_t{0});
      std::fill(c.begin(), c.end(), 0);
      c[0] = m + 5;
      c[1] = -5;
    });
    expect_content_error(base_spec(0, dtype), past_m_first, MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT,
                         {"group_list[1]", "-5"});
  }
}

TEST(Errors, GroupSumMismatch) {
  expect_content_error(base_spec(), edited_counts([](std::vector<int64_t>& c) { c[3] += 1; }),
                       MOEGRAD_STATUS_GROUP_SUM_MISMATCH, {"group", "33"});
  expect_content_error(base_spec(), edited_counts([](std::vector<int64_t>& c) { c[0] -= 1; }),
                       MOEGRAD_STATUS_GROUP_SUM_MISMATCH, {"group", "33"});
  ProblemSpec cumsum = base_spec(1);
  cumsum.group_list_type = MOEGRAD_GROUP_LIST_CUMSUM;
  expect_content_error(
      cumsum,
      [](Problem& p) {
        ASSERT_LE(p.group_list.get_index(2), 31) << "precondition: last expert has >= 2 rows";
        p.group_list.set_index(3, 31);  // non-decreasing, last != M
      },
      MOEGRAD_STATUS_GROUP_SUM_MISMATCH, {"group", "33"});
}

TEST(Errors, CumsumDecreasing) {
  ProblemSpec s = base_spec();
  s.group_list_type = MOEGRAD_GROUP_LIST_CUMSUM;
  const int64_t first = Problem(s).group_list.get_index(0);  // the same seeded problem as below
  ASSERT_GE(first, 2) << "precondition: first expert has >= 2 rows";
  expect_content_error(
      s, [first](Problem& p) { p.group_list.set_index(1, first - 1); }, MOEGRAD_STATUS_CUMSUM_DECREASING,
      {"group_list[1]=" + std::to_string(first - 1), "group_list[0]=" + std::to_string(first)});
}

TEST(Errors, MExceedsSlots) {
  Fixture f(base_spec(0));  // M = 33
  HostTensor gx(kDLF32, {10, 23});
  f.call.grad_x = gx.view();
  f.call.args.batch = 10;  // batch*top_k = 30 < M
  expect_failure(f.call.args, gx, MOEGRAD_STATUS_M_EXCEEDS_SLOTS, {"33", "30"});
}

TEST(Errors, IndexTooShort) {
  Fixture f(base_spec(0));
  int64_t shape[] = {32};  // L < M = 33
  f.call.idx.shape = shape;
  expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_INDEX_TOO_SHORT, {"expanded_row_idx", "32", "33"});
}

TEST(Errors, IndexTooLong) {
  Fixture f(base_spec(1));
  HostTensor longer(dl_type(IndexDType::kI64), {34});  // L > batch*top_k = 33
  for (int64_t p = 0; p < 33; ++p) longer.set_index(p, f.p.idx.get_index(p));
  longer.set_index(33, -1);
  f.call.idx = longer.view();
  expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_INDEX_TOO_LONG, {"expanded_row_idx", "34", "33"});
}

// A tensor longer than its shape rule allows claims bytes it does not own:
// here expanded_row_idx's 34th element would be grad_x's first two floats.
// The length is the caller's error, so it is named (not the overlap that
// only the wrong length creates), and neither tensor changes.
TEST(Errors, IndexTooLongIsNamedBeforeTheOverlapItImplies) {
  Fixture f(base_spec(1));
  const size_t idx_bytes = 33 * sizeof(int64_t), gx_bytes = 11 * 23 * sizeof(float);
  std::vector<int64_t> buffer((idx_bytes + gx_bytes) / sizeof(int64_t) + 1, 0);
  for (int64_t p = 0; p < 33; ++p) buffer[static_cast<size_t>(p)] = f.p.idx.get_index(p);
  auto* bytes = reinterpret_cast<unsigned char*>(buffer.data());
  int64_t idx_shape[] = {34};  // L > batch*top_k = 33
  f.call.idx.data = bytes;
  f.call.idx.byte_offset = 0;
  f.call.idx.shape = idx_shape;
  f.call.idx.strides = nullptr;
  f.call.idx.dtype = dl_type(IndexDType::kI64);
  f.call.grad_x.data = bytes + idx_bytes;
  f.call.grad_x.byte_offset = 0;
  f.call.grad_x.strides = nullptr;
  std::fill_n(reinterpret_cast<float*>(bytes + idx_bytes), 11 * 23, std::numeric_limits<float>::quiet_NaN());
  const std::vector<int64_t> before = buffer;
  for (bool one_shot : {false, true}) {
    SCOPED_TRACE(one_shot ? "one-shot moegrad_grad_x_run" : "two phases");
    RunOptions o;
    o.one_shot = one_shot;
    const Outcome out = run_call(f.call.args, o);
    EXPECT_EQ(out.status, MOEGRAD_STATUS_INDEX_TOO_LONG) << out.describe();
    EXPECT_NE(out.message.find("L=34"), std::string::npos) << out.message;
    EXPECT_EQ(std::memcmp(before.data(), buffer.data(), buffer.size() * sizeof(int64_t)), 0)
        << "a failing call wrote into the buffer";
  }
}

TEST(Errors, IndexOutOfRangeType0) {
  // Values must be -1 or in [0, batch*top_k = 33); the bad one is the last
  // row, so a lazy check would already have written other tokens.
  for (IndexDType dtype : {IndexDType::kI64, IndexDType::kI32})
    for (int64_t bad : {int64_t{33}, int64_t{777}, int64_t{-2}}) {
      SCOPED_TRACE(std::string(index_dtype_name(dtype)) + " value " + std::to_string(bad));
      expect_content_error(
          base_spec(0, dtype), [bad](Problem& p) { p.idx.set_index(p.M - 1, bad); },
          MOEGRAD_STATUS_INDEX_OUT_OF_RANGE, {"expanded_row_idx", std::to_string(bad)});
    }
}

TEST(Errors, IndexOutOfRangeType1) {
  // Values must be -1 or in [0, M = 33).
  for (IndexDType dtype : {IndexDType::kI64, IndexDType::kI32})
    for (int64_t bad : {int64_t{33}, int64_t{555}, int64_t{-4}}) {
      SCOPED_TRACE(std::string(index_dtype_name(dtype)) + " value " + std::to_string(bad));
      expect_content_error(
          base_spec(1, dtype), [bad](Problem& p) { p.idx.set_index(p.routing.L() - 1, bad); },
          MOEGRAD_STATUS_INDEX_OUT_OF_RANGE, {"expanded_row_idx", std::to_string(bad)});
    }
}

TEST(Errors, DuplicateIndexType1) {
  for (IndexDType dtype : {IndexDType::kI64, IndexDType::kI32}) {
    SCOPED_TRACE(index_dtype_name(dtype));
    // The last position claims row 29, which another position already claims.
    expect_content_error(
        base_spec(1, dtype),
        [](Problem& p) {
          const int64_t last = p.routing.L() - 1;
          ASSERT_NE(p.idx.get_index(last), 29) << "precondition";
          p.idx.set_index(last, 29);
        },
        MOEGRAD_STATUS_DUPLICATE_INDEX, {"expanded_row_idx", "29"});
  }
}

// ---- layout, device, ISA, context -------------------------------------------------

TEST(Errors, LanesNotOne) {
  const char* names[] = {"grad_y", "weight", "expanded_row_idx", "group_list", "grad_x"};
  for (int t = 0; t < 5; ++t) {
    SCOPED_TRACE(names[t]);
    Fixture f(base_spec());
    DLTensor* tensors[] = {&f.call.grad_y, &f.call.weight, &f.call.idx, &f.call.group_list, &f.call.grad_x};
    tensors[t]->dtype.lanes = 2;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_BAD_LAYOUT, {names[t]});
  }
}

TEST(Errors, GradXStridesNegativeOrOverlapping) {
  struct Case {
    const char* name;
    int64_t row, col;
    const char* says;  // the reason the message gives
  };
  const char* kNotPositive = "is not positive";
  const char* kOverlap = "(elements would overlap)";
  for (Case c : {Case{"negative row stride", -23, 1, kNotPositive},  //
                 Case{"negative column stride", 23, -1, kNotPositive},
                 Case{"zero row stride", 0, 1, kNotPositive},  //
                 Case{"rows overlap", 22, 1, kOverlap},        //
                 Case{"equal strides", 1, 1, kOverlap}}) {
    SCOPED_TRACE(c.name);
    Fixture f(base_spec());
    int64_t strides[] = {c.row, c.col};
    f.call.grad_x.strides = strides;
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_BAD_LAYOUT, {"grad_x", c.says});
  }
}

// The message names the strides the caller gave, also a one-element
// dimension's that validation reads as 0 (beyond 2^31 - 1).
TEST(Errors, AGradXLayoutRefusalNamesTheStridesGiven) {
  Fixture f(make_spec({.batch = 1, .top_k = 2, .experts = 3, .K = 5, .N = 4}));
  int64_t strides[] = {std::numeric_limits<int64_t>::max(), 0};  // columns overlap
  f.call.grad_x.strides = strides;
  expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_BAD_LAYOUT, {"grad_x strides [9223372036854775807, 0]"});
}

// grad_x sharing bytes with an input would feed partial sums back into the
// sums (the driver zeroes and accumulates it while reading the inputs). Each
// input is copied into a buffer whose last element grad_x also covers: the
// call fails and the buffer is unchanged. One byte further on, the two are
// disjoint and the call succeeds.
TEST(Errors, GradXSharesBytesWithAnInput) {
  const char* names[] = {"grad_y", "weight", "expanded_row_idx", "group_list"};
  for (int t = 0; t < 4; ++t) {
    for (bool touching : {true, false}) {
      SCOPED_TRACE(std::string(names[t]) + (touching ? ", last element shared" : ", adjacent"));
      Fixture f(base_spec());
      DLTensor* inputs[] = {&f.call.grad_y, &f.call.weight, &f.call.idx, &f.call.group_list};
      DLTensor& in = *inputs[t];
      ASSERT_EQ(in.strides, nullptr) << "the test assumes compact inputs";
      size_t elem = in.dtype.bits / 8, in_bytes = elem;
      for (int d = 0; d < in.ndim; ++d) in_bytes *= static_cast<size_t>(in.shape[d]);
      const size_t gx_bytes = static_cast<size_t>(f.call.grad_x.shape[0] * f.call.grad_x.shape[1]) * sizeof(float);
      std::vector<float> buffer((in_bytes + gx_bytes) / sizeof(float) + 2, 0.0f);
      auto* bytes = reinterpret_cast<unsigned char*>(buffer.data());
      std::copy_n(static_cast<const unsigned char*>(in.data) + in.byte_offset, in_bytes, bytes);
      in.data = bytes;
      in.byte_offset = 0;
      const size_t gx_offset = (touching ? in_bytes - 1 : in_bytes) / sizeof(float) * sizeof(float);
      auto* gx = reinterpret_cast<float*>(bytes + (touching ? gx_offset : (in_bytes + 3) / 4 * 4));
      f.call.grad_x.data = gx;
      f.call.grad_x.strides = nullptr;
      f.call.grad_x.byte_offset = 0;
      const size_t gx_count = gx_bytes / sizeof(float);
      if (!touching) std::fill_n(gx, gx_count, std::numeric_limits<float>::quiet_NaN());
      const std::vector<float> before = buffer;
      const Outcome out = run_call(f.call.args);
      if (!touching) {
        EXPECT_EQ(out.status, MOEGRAD_STATUS_SUCCESS) << out.describe();
        EXPECT_TRUE(bitwise_equal(Floats(gx, gx + gx_count), reference_contract_order(f.p), f.p.K, f.p.describe()));
        continue;
      }
      EXPECT_EQ(out.status, MOEGRAD_STATUS_ALIASING) << out.describe();
      EXPECT_EQ(out.phase, "plan");
      EXPECT_NE(out.message.find("grad_x"), std::string::npos) << out.message;
      EXPECT_NE(out.message.find(names[t]), std::string::npos) << out.message;
      EXPECT_EQ(std::memcmp(before.data(), buffer.data(), buffer.size() * sizeof(float)), 0)
          << "a failing call wrote into the buffer";
    }
  }
}

// The run writes its workspace while it reads the inputs and accumulates
// grad_x, so a workspace sharing a byte with any tensor would corrupt it.
// Each tensor is copied into a buffer right after a workspace-sized gap: a
// workspace whose last byte is the tensor's first is refused, naming the
// tensor, with the buffer unchanged and the executor not used up; one byte
// earlier the two are disjoint and the same executor runs, exactly.
TEST(Errors, WorkspaceSharesBytesWithATensor) {
  const char* names[] = {"grad_y", "weight", "expanded_row_idx", "group_list", "grad_x"};
  auto ctx = make_context();
  for (int t = 0; t < 5; ++t) {
    SCOPED_TRACE(names[t]);
    Fixture f(base_spec());
    DLTensor* tensors[] = {&f.call.grad_y, &f.call.weight, &f.call.idx, &f.call.group_list, &f.call.grad_x};
    DLTensor& tensor = *tensors[t];
    ASSERT_EQ(tensor.strides, nullptr) << "the test assumes compact tensors";
    size_t bytes = tensor.dtype.bits / 8;
    for (int d = 0; d < tensor.ndim; ++d) bytes *= static_cast<size_t>(tensor.shape[d]);
    size_t ws = 0;
    ExecutorPtr ex = plan(f, ctx.get(), &ws);
    ASSERT_GT(ws, 0u) << "every plan of this version has a workspace";
    const size_t offset = (ws + 63) / 64 * 64;  // the tensor's first byte in the buffer
    std::vector<double> storage((offset + bytes) / sizeof(double) + 1, 0.0);
    auto* buffer = reinterpret_cast<unsigned char*>(storage.data());
    std::copy_n(static_cast<const unsigned char*>(tensor.data) + tensor.byte_offset, bytes, buffer + offset);
    // The executor keeps the planned pointers: plan again over the copy.
    tensor.data = buffer + offset;
    tensor.byte_offset = 0;
    ex = plan(f, ctx.get(), &ws);
    ASSERT_LE(ws, offset);
    const std::vector<double> before = storage;

    ASSERT_EQ(moegrad_grad_x(buffer + offset - ws + 1, ws, ex.get(), ctx.get()), MOEGRAD_STATUS_ALIASING);
    const std::string msg = moegrad_last_error_message();
    EXPECT_NE(msg.find("workspace"), std::string::npos) << msg;
    EXPECT_NE(msg.find(names[t]), std::string::npos) << msg;
    EXPECT_EQ(std::memcmp(before.data(), storage.data(), storage.size() * sizeof(double)), 0)
        << "a refused run wrote into the buffer";
    if (t != 4) {
      EXPECT_TRUE(f.grad_x.all_sentinel()) << "a refused run wrote grad_x";
    }

    ASSERT_EQ(moegrad_grad_x(buffer + offset - ws, ws, ex.get(), ctx.get()), MOEGRAD_STATUS_SUCCESS)
        << moegrad_last_error_message();
    const Reference64 ref = reference_f64(f.p);  // small integers: exact in f32
    const float* gx = static_cast<const float*>(f.call.grad_x.data);
    for (size_t i = 0; i < ref.value.size(); ++i) ASSERT_EQ(gx[i], ref.value[i]) << "element " << i;
  }
}

// Strides whose elements are all distinct although a row stride is smaller
// than a whole row of the other dimension: [2, 3] with strides [5, 2] puts
// the elements at 0, 2, 4, 5, 7, 9.
TEST(Errors, InterleavedButDistinctGradXStridesAreAccepted) {
  ProblemSpec spec = make_spec({.batch = 2, .top_k = 1, .experts = 1, .K = 3, .N = 4}, 0, 1.0, 1);
  spec.values = Values::kSmallInt;
  Problem p(spec);
  HostTensor grad_x = p.make_grad_x();
  Call call(p, grad_x);
  std::vector<float> buffer(10, std::numeric_limits<float>::quiet_NaN());
  int64_t strides[] = {5, 2};
  call.grad_x.data = buffer.data();
  call.grad_x.byte_offset = 0;
  call.grad_x.strides = strides;
  const Outcome out = run_call(call.args);
  ASSERT_EQ(out.status, MOEGRAD_STATUS_SUCCESS) << out.describe();
  const Reference64 ref = reference_f64(p);  // small integers: exact in f32
  for (size_t b = 0; b < 2; ++b)
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(buffer[b * 5 + k * 2], ref.value[b * 3 + k]) << b << "," << k;
  for (size_t gap : {1u, 3u, 6u, 8u}) EXPECT_TRUE(std::isnan(buffer[gap])) << "element " << gap << " was written";
}

TEST(Errors, TensorNotOnCpu) {
  const char* names[] = {"grad_y", "weight", "expanded_row_idx", "group_list", "grad_x"};
  for (int t = 0; t < 5; ++t) {
    SCOPED_TRACE(names[t]);
    Fixture f(base_spec());
    DLTensor* tensors[] = {&f.call.grad_y, &f.call.weight, &f.call.idx, &f.call.group_list, &f.call.grad_x};
    tensors[t]->device = DLDevice{kDLCUDA, 0};
    expect_failure(f.call.args, f.grad_x, MOEGRAD_STATUS_UNSUPPORTED_DEVICE, {names[t]});
  }
}

TEST(Errors, ForcedIsaThisCpuLacks) {
  bool any = false;
  for (moegrad_isa isa : explicit_isas()) {
    if (moegrad_isa_available(isa)) continue;
    any = true;
    SCOPED_TRACE(isa_label(isa));
    auto ctx = make_context();
    EXPECT_EQ(moegrad_context_set_isa(ctx.get(), isa), MOEGRAD_STATUS_ISA_UNAVAILABLE);
    EXPECT_NE(std::string(moegrad_last_error_message()).find(isa_label(isa)), std::string::npos)
        << moegrad_last_error_message();
    ScopedEnv env("MOEGRAD_ISA", isa_label(isa));
    moegrad_context* raw = nullptr;
    EXPECT_EQ(moegrad_context_create(&raw), MOEGRAD_STATUS_ISA_UNAVAILABLE);
    moegrad_context_destroy(raw);
  }
  if (!any) GTEST_SKIP() << "this CPU has every ISA path";
}

TEST(Errors, BadContextSettings) {
  auto ctx = make_context();
  EXPECT_EQ(moegrad_context_set_num_threads(ctx.get(), -1), MOEGRAD_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("-1"), std::string::npos) << moegrad_last_error_message();
  EXPECT_EQ(moegrad_context_set_isa(ctx.get(), static_cast<moegrad_isa>(42)), MOEGRAD_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(moegrad_last_error_message()).find("42"), std::string::npos) << moegrad_last_error_message();

  for (const char* value : {"bogus", "avx1024"}) {
    SCOPED_TRACE(std::string("MOEGRAD_ISA='") + value + "'");
    ScopedEnv env("MOEGRAD_ISA", value);
    moegrad_context* raw = nullptr;
    EXPECT_EQ(moegrad_context_create(&raw), MOEGRAD_STATUS_INVALID_ARGUMENT);
    const std::string msg = moegrad_last_error_message();
    EXPECT_NE(msg.find("MOEGRAD_ISA"), std::string::npos) << msg;
    EXPECT_NE(msg.find(value), std::string::npos) << msg;
    moegrad_context_destroy(raw);
  }
  for (const char* value : {"0", "-4", "abc", "3x", "99999999999999999999"}) {
    SCOPED_TRACE(std::string("MOEGRAD_NUM_THREADS='") + value + "'");
    ScopedEnv env("MOEGRAD_NUM_THREADS", value);
    moegrad_context* raw = nullptr;
    EXPECT_EQ(moegrad_context_create(&raw), MOEGRAD_STATUS_INVALID_ARGUMENT);
    const std::string msg = moegrad_last_error_message();
    EXPECT_NE(msg.find("MOEGRAD_NUM_THREADS"), std::string::npos) << msg;
    EXPECT_NE(msg.find(value), std::string::npos) << msg;
    moegrad_context_destroy(raw);
  }
}

}  // namespace
}  // namespace mgt
