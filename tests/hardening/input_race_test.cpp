// An input another thread writes during a call (a caller's bug: a loader
// refilling a shared buffer, a Python thread while the call has released
// the GIL) may give a wrong result, but never a write outside the call's
// buffers nor a crash. Each index value is read once: where it was read
// twice, once to check and count and once to use, a value changed between
// the reads escaped the check. moe_init_routing then placed more slots in an
// expert than it had counted, past the end of its workspace; a group list
// whose counts read [1, 0, 0, 1] and then [-1, 0, 0, 3] (M = 2) gave its last
// expert rows [-1, 2), and grouped_matmul wrote the row before y.
//
// A race is not repeatable: each test races a writer thread for thousands
// of calls and checks every call's buffers, guard bytes around them
// included. Before the single reads, on a 2-vCPU VM, moe_init_routing's
// test crashed (SIGSEGV) in each of three runs and grouped_matmul's wrote
// outside y at call 298, 910 and 1716; on one CPU the race rarely happens,
// and the tests still pass. ASan (scripts/test_sanitizers.sh) sees the same
// overruns as heap-buffer-overflow. Not run under TSan, which would report
// the race the tests make on purpose.
#include <moegrad/moegrad_layer.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <stop_token>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kRoutingCalls = 3000;
constexpr int kMatmulCalls = 20000;  // a call of a few microseconds
constexpr uint32_t kGuard = 0xA5A5A5A5u;

DLTensor tensor(void* data, DLDataType dtype, int64_t* shape, int32_t ndim) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr DLDataType kI32{kDLInt, 32, 1};
constexpr DLDataType kI64{kDLInt, 64, 1};

// Stores `a` and then `b` into `v`, element by element, until stopped (when
// the test returns, a failed assertion included); relaxed atomics, so only
// the library's plain reads race.
template <class T>
std::jthread flipper(std::vector<T>& v, const std::vector<T>& a, const std::vector<T>& b) {
  return std::jthread([&v, &a, &b](std::stop_token stop) {
    for (bool first = true; !stop.stop_requested(); first = !first) {
      const std::vector<T>& src = first ? a : b;
      for (size_t i = 0; i < v.size(); ++i) std::atomic_ref<T>(v[i]).store(src[i], std::memory_order_relaxed);
    }
  });
}

// A buffer of `bytes` with guard words before and after it.
class Guarded {
 public:
  explicit Guarded(size_t bytes) : words_((bytes + 3) / 4 + 2 * kPad, kGuard), bytes_(bytes) {}
  void* data() { return words_.data() + kPad; }
  size_t bytes() const { return bytes_; }
  bool guards_intact() const {
    const size_t inner = (bytes_ + 3) / 4;
    for (size_t i = 0; i < kPad; ++i)
      if (words_[i] != kGuard || words_[kPad + inner + i] != kGuard) return false;
    return true;
  }

 private:
  static constexpr size_t kPad = 1024;  // 4 KiB each side
  std::vector<uint32_t> words_;
  size_t bytes_;
};

class ContextOfOne {
 public:
  ContextOfOne() {
    EXPECT_EQ(moegrad_context_create(&ctx_), MOEGRAD_STATUS_SUCCESS);
    EXPECT_EQ(moegrad_context_set_num_threads(ctx_, 1), MOEGRAD_STATUS_SUCCESS);
  }
  ~ContextOfOne() { moegrad_context_destroy(ctx_); }
  moegrad_context* get() const { return ctx_; }

 private:
  moegrad_context* ctx_ = nullptr;
};

// expert_idx flips between all 0 and all 3 (G = 4): every value is valid,
// and each call must give a routing of the values it read: a permutation of
// the slots, ascending within each expert, counts that sum to batch*top_k
// and rows copied from their tokens.
TEST(InputRace, MoeInitRoutingExpertIdxWrittenDuringTheCall) {
  constexpr int64_t kBatch = 256, kTopK = 2, kG = 4, kK = 8, kSlots = kBatch * kTopK;
  std::vector<float> x(kBatch * kK);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  std::vector<int32_t> experts(kSlots, 0);
  const std::vector<int32_t> all_first(kSlots, 0), all_last(kSlots, kG - 1);

  int64_t x_shape[2] = {kBatch, kK}, e_shape[2] = {kBatch, kTopK}, ex_shape[2] = {kSlots, kK};
  int64_t idx_shape[1] = {kSlots}, gl_shape[1] = {kG};
  Guarded expanded_x(kSlots * kK * sizeof(float)), row_idx(kSlots * sizeof(int64_t)), group_list(kG * sizeof(int64_t));
  const DLTensor x_t = tensor(x.data(), kF32, x_shape, 2), e_t = tensor(experts.data(), kI32, e_shape, 2);
  const DLTensor ex_t = tensor(expanded_x.data(), kF32, ex_shape, 2);
  const DLTensor idx_t = tensor(row_idx.data(), kI64, idx_shape, 1);
  const DLTensor gl_t = tensor(group_list.data(), kI64, gl_shape, 1);
  const moegrad_moe_init_routing_args args{&x_t, &e_t, &ex_t, &idx_t, &gl_t, MOEGRAD_NO_LIMIT, MOEGRAD_NO_LIMIT,
                                           MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL, nullptr};
  const ContextOfOne ctx;

  const std::jthread writer = flipper(experts, all_first, all_last);
  for (int call = 0; call < kRoutingCalls; ++call) {
    size_t ws_bytes = 0;
    moegrad_op_executor* ex = nullptr;
    ASSERT_EQ(moegrad_moe_init_routing_get_workspace_size(&args, ctx.get(), &ws_bytes, &ex), MOEGRAD_STATUS_SUCCESS);
    Guarded workspace(ws_bytes);
    const moegrad_status status = moegrad_moe_init_routing(workspace.data(), ws_bytes, ex, ctx.get());
    moegrad_op_executor_destroy(ex);
    ASSERT_EQ(status, MOEGRAD_STATUS_SUCCESS) << "call " << call << ": " << moegrad_last_error_message();
    ASSERT_TRUE(workspace.guards_intact()) << "call " << call << " wrote outside its workspace";
    ASSERT_TRUE(expanded_x.guards_intact() && row_idx.guards_intact() && group_list.guards_intact())
        << "call " << call << " wrote outside an output";

    const auto* counts = static_cast<const int64_t*>(group_list.data());
    const auto* pos = static_cast<const int64_t*>(row_idx.data());
    const auto* rows = static_cast<const float*>(expanded_x.data());
    int64_t sum = 0;
    for (int64_t g = 0; g < kG; ++g) {
      ASSERT_GE(counts[g], 0) << "call " << call;
      sum += counts[g];
    }
    ASSERT_EQ(sum, kSlots) << "call " << call;
    std::vector<bool> seen(kSlots, false);
    for (int64_t g = 0, i = 0; g < kG; ++g) {
      for (int64_t end = i + counts[g]; i < end; ++i) {
        ASSERT_TRUE(pos[i] >= 0 && pos[i] < kSlots && !seen[pos[i]]) << "call " << call << ", row " << i;
        seen[pos[i]] = true;
        if (i + 1 < end) {
          ASSERT_LT(pos[i], pos[i + 1]) << "call " << call << ": expert " << g << " not ascending";
        }
        ASSERT_EQ(std::memcmp(rows + i * kK, x.data() + (pos[i] / kTopK) * kK, kK * sizeof(float)), 0)
            << "call " << call << ", row " << i;
      }
    }
  }
}

// group_list flips between [1, 0, 0, 1] (valid, M = 2) and [-1, 0, 0, 3]
// (a negative count; its sum is M). Each call must refuse what it read or
// compute the valid one: y = [x0 W0, x1 W3], exactly (small integers), and
// nothing written outside y.
TEST(InputRace, GroupedMatmulGroupListWrittenDuringTheCall) {
  constexpr int64_t kM = 2, kG = 4, kK = 3, kN = 5;
  std::vector<float> x = {1, 2, 3, -1, 0, 2};
  std::vector<float> w(kG * kK * kN);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  std::vector<int64_t> group_list = {1, 0, 0, 1};
  const std::vector<int64_t> valid = {1, 0, 0, 1}, negative = {-1, 0, 0, 3};
  std::vector<float> want(kM * kN, 0.0f);
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t k = 0; k < kK; ++k) {
      want[n] += x[k] * w[(0 * kK + k) * kN + n];
      want[kN + n] += x[kK + k] * w[(3 * kK + k) * kN + n];
    }

  int64_t x_shape[2] = {kM, kK}, w_shape[3] = {kG, kK, kN}, gl_shape[1] = {kG}, y_shape[2] = {kM, kN};
  Guarded y(kM * kN * sizeof(float));
  const DLTensor x_t = tensor(x.data(), kF32, x_shape, 2), w_t = tensor(w.data(), kF32, w_shape, 3);
  const DLTensor gl_t = tensor(group_list.data(), kI64, gl_shape, 1), y_t = tensor(y.data(), kF32, y_shape, 2);
  const moegrad_grouped_matmul_args args{&x_t, &w_t, &gl_t, &y_t, MOEGRAD_GROUP_LIST_COUNT};
  const ContextOfOne ctx;

  const std::jthread writer = flipper(group_list, valid, negative);
  int computed = 0;
  for (int call = 0; call < kMatmulCalls; ++call) {
    std::fill_n(static_cast<float*>(y.data()), kM * kN, 1e30f);
    const moegrad_status status = moegrad_grouped_matmul_run(&args, ctx.get());
    ASSERT_TRUE(y.guards_intact()) << "call " << call << " wrote outside y";
    ASSERT_TRUE(status == MOEGRAD_STATUS_SUCCESS || status == MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT ||
                status == MOEGRAD_STATUS_GROUP_SUM_MISMATCH)
        << "call " << call << ": " << moegrad_status_string(status) << ": " << moegrad_last_error_message();
    if (status != MOEGRAD_STATUS_SUCCESS) continue;
    ++computed;
    ASSERT_EQ(std::memcmp(y.data(), want.data(), want.size() * sizeof(float)), 0) << "call " << call;
  }
  RecordProperty("computed", computed);
}

}  // namespace
