// Adversarial use of the C API beyond what the fuzzer decodes: DLPack fields
// at their extremes, context settings and environment variables out of
// range, NULL out-pointers. Every refusal is a clean status with a one-line
// message, leaves outputs untouched and leaks nothing (LeakSanitizer in the
// ASan build).
#include <moegrad/moegrad.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "problem.h"
#include "reference.h"
#include "runner.h"
#include "scoped_env.h"

namespace mgh {
namespace {

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

// DLTensor::byte_offset is a uint64_t. A value of 2^64 - 8 makes
// data + byte_offset wrap around to 8 bytes *before* data: validation must
// refuse it (SPEC §4: offsets are overflow-checked) rather than read or
// write outside the tensor. The bytes just before data belong to this test's
// own buffer, so a missing check shows up as a wrong status (or, under
// UBSan, as the pointer overflow itself), not as heap corruption.
TEST(ApiMisuse, ByteOffsetThatWrapsAroundIsRefused) {
  const char* names[] = {"grad_y", "weight", "expanded_row_idx", "group_list", "grad_x"};
  for (int target = 0; target < 5; ++target) {
    for (const uint64_t back : {uint64_t{8}, uint64_t{64}}) {
      ProblemSpec s;
      s.pad_bytes = 64;  // 64 bytes of this test's memory before every tensor's elements
      s.seed = 5;
      Problem p(s);
      Tensor* t[] = {&p.grad_y, &p.weight, &p.idx, &p.group_list, &p.grad_x};
      DLTensor d = t[target]->dl();
      // data moved up by `back`, byte_offset "negative": the element address
      // data + byte_offset (mod 2^64) lands inside the 64-byte front pad.
      d.data = static_cast<std::byte*>(d.data) + d.byte_offset;
      d.byte_offset = uint64_t{0} - back;
      moegrad_grad_x_args a = p.args();
      const DLTensor** slot[] = {&a.grad_y, &a.weight, &a.expanded_row_idx, &a.group_list, &a.grad_x};
      *slot[target] = &d;
      p.grad_x.fill_words(0x7FC0DEADu);
      const auto before = p.grad_x.snapshot();
      const RunResult r = run_grad_x(&a, {});
      // `back` is a multiple of every element size, so the address stays
      // aligned: the wrap is the one error.
      EXPECT_EQ(r.status, MOEGRAD_STATUS_SIZE_OVERFLOW) << names[target] << " byte_offset=2^64-" << back << ": "
                                                        << r.describe();
      if (!r.ok()) {
        EXPECT_TRUE(p.grad_x.snapshot() == before) << names[target] << ": grad_x written by a failed call";
      }
    }
  }
}

// byte_offset >= 2^63 cannot be an offset into any tensor (SPEC §4: offsets
// are int64 and overflow-checked). Planning only: it must be refused there,
// and running a wrongly accepted plan would dereference a wild pointer.
TEST(ApiMisuse, ByteOffsetBeyondInt64IsRefusedAtPlanning) {
  for (int target = 0; target < 5; ++target) {
    for (const uint64_t off : {uint64_t{1} << 63, ~uint64_t{0} - 3, (uint64_t{1} << 63) + 64}) {
      Problem p(ProblemSpec{});
      Tensor* t[] = {&p.grad_y, &p.weight, &p.idx, &p.group_list, &p.grad_x};
      DLTensor d = t[target]->dl();
      d.byte_offset = off;
      moegrad_grad_x_args a = p.args();
      const DLTensor** slot[] = {&a.grad_y, &a.weight, &a.expanded_row_idx, &a.group_list, &a.grad_x};
      *slot[target] = &d;
      size_t bytes = 0;
      moegrad_executor* raw = nullptr;
      const moegrad_status s = moegrad_grad_x_get_workspace_size(&a, nullptr, &bytes, &raw);
      ExecutorPtr ex = own(raw);
      EXPECT_TRUE(s == MOEGRAD_STATUS_SIZE_OVERFLOW || s == MOEGRAD_STATUS_BAD_LAYOUT)
          << "tensor " << target << " byte_offset=" << off << ": " << moegrad_status_string(s);
    }
  }
}

TEST(ApiMisuse, FailedPlanReturnsNoExecutor) {
  Problem p(ProblemSpec{});
  moegrad_grad_x_args a = p.args();
  a.top_k = 0;
  size_t bytes = 12345;
  moegrad_executor* ex = reinterpret_cast<moegrad_executor*>(uintptr_t{0x1});
  EXPECT_EQ(moegrad_grad_x_get_workspace_size(&a, nullptr, &bytes, &ex), MOEGRAD_STATUS_BAD_TOP_K);
  EXPECT_EQ(ex, nullptr);
  EXPECT_EQ(bytes, 0u);
  EXPECT_TRUE(one_line(moegrad_last_error_message()));
}

TEST(ApiMisuse, NullEverywhereIsHarmless) {
  moegrad_executor_destroy(nullptr);
  moegrad_context_destroy(nullptr);
  EXPECT_EQ(moegrad_context_create(nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_set_num_threads(nullptr, 1), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_set_isa(nullptr, MOEGRAD_ISA_AUTO), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_set_fast_bf16(nullptr, 0), MOEGRAD_STATUS_NULL_POINTER);
  int32_t n = 0;
  moegrad_isa isa = MOEGRAD_ISA_AUTO;
  EXPECT_EQ(moegrad_context_get_num_threads(nullptr, &n), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_get_isa(nullptr, &isa), MOEGRAD_STATUS_NULL_POINTER);
  moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 1);
  EXPECT_EQ(moegrad_context_get_num_threads(ctx.get(), nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_get_isa(ctx.get(), nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_grad_x(nullptr, 0, nullptr, nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_grad_x_run(nullptr, nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_TRUE(one_line(moegrad_last_error_message()));
}

TEST(ApiMisuse, ContextSettingsOutOfRange) {
  moegrad::Context ctx = make_context(MOEGRAD_ISA_SCALAR, 2);
  for (int32_t bad : {-1, std::numeric_limits<int32_t>::min(), 4097, std::numeric_limits<int32_t>::max()}) {
    EXPECT_EQ(moegrad_context_set_num_threads(ctx.get(), bad), MOEGRAD_STATUS_INVALID_ARGUMENT) << bad;
    EXPECT_TRUE(one_line(moegrad_last_error_message()));
    int32_t n = 0;
    ASSERT_EQ(moegrad_context_get_num_threads(ctx.get(), &n), MOEGRAD_STATUS_SUCCESS);
    EXPECT_EQ(n, 2) << "a refused setting changed the context";
  }
  for (int bad : {4, -1, 1000}) {
    EXPECT_EQ(moegrad_context_set_isa(ctx.get(), static_cast<moegrad_isa>(bad)), MOEGRAD_STATUS_INVALID_ARGUMENT) << bad;
    moegrad_isa isa = MOEGRAD_ISA_AUTO;
    ASSERT_EQ(moegrad_context_get_isa(ctx.get(), &isa), MOEGRAD_STATUS_SUCCESS);
    EXPECT_EQ(isa, MOEGRAD_ISA_SCALAR);
  }
  for (int32_t bad : {2, -1, 255}) EXPECT_EQ(moegrad_context_set_fast_bf16(ctx.get(), bad), MOEGRAD_STATUS_INVALID_ARGUMENT);
  EXPECT_STRNE(moegrad_isa_name(static_cast<moegrad_isa>(77)), nullptr);
  EXPECT_EQ(moegrad_isa_available(static_cast<moegrad_isa>(77)), 0);
}

TEST(ApiMisuse, BadEnvironmentFailsContextCreationCleanly) {
  struct C {
    const char* var;
    const char* value;
  } cases[] = {
      {"MOEGRAD_NUM_THREADS", "abc"},  {"MOEGRAD_NUM_THREADS", "0"},   {"MOEGRAD_NUM_THREADS", "-3"},
      {"MOEGRAD_NUM_THREADS", "4097"}, {"MOEGRAD_NUM_THREADS", "2x"},  {"MOEGRAD_NUM_THREADS", "99999999999999999999"},
      {"MOEGRAD_NUM_THREADS", "2 "},   {"MOEGRAD_NUM_THREADS", " 2"},  {"MOEGRAD_NUM_THREADS", "+2"},
      {"MOEGRAD_ISA", "avx1024"},     {"MOEGRAD_ISA", "AVX2 "},
      {"MOEGRAD_ENGINE", "fast"},      {"MOEGRAD_ENGINE", "Rowvec"},
      {"MOEGRAD_L1D_BYTES", "48K"},    {"MOEGRAD_L1D_BYTES", "-49152"}, {"MOEGRAD_L1D_BYTES", "16383"},
      {"MOEGRAD_L1D_BYTES", "1048577"}, {"MOEGRAD_L1D_BYTES", " 49152"}, {"MOEGRAD_L2_BYTES", "1M"},
      {"MOEGRAD_L2_BYTES", "131071"},  {"MOEGRAD_L2_BYTES", "67108865"}, {"MOEGRAD_L2_BYTES", "+1048576"},
      {"MOEGRAD_L2_BYTES", "99999999999999999999999"},
  };
  for (const C& c : cases) {
    ScopedEnv env(c.var, c.value);
    moegrad_context* ctx = reinterpret_cast<moegrad_context*>(uintptr_t{0x1});
    const moegrad_status s = moegrad_context_create(&ctx);
    const std::string message = moegrad_last_error_message();
    EXPECT_EQ(s, MOEGRAD_STATUS_INVALID_ARGUMENT) << c.var << "=" << c.value;
    EXPECT_EQ(ctx, nullptr) << c.var << "=" << c.value;
    EXPECT_TRUE(one_line(message.c_str())) << c.var << "=" << c.value;
    // The message names the variable and quotes its value, so a user knows what to fix.
    EXPECT_NE(message.find(std::string(c.var) + "='" + c.value + "'"), std::string::npos) << message;
    if (s == MOEGRAD_STATUS_SUCCESS) moegrad_context_destroy(ctx);
  }
}

TEST(ApiMisuse, StatusStringsForEveryValue) {
  for (int v = -5; v < 200; ++v) {
    const char* s = moegrad_status_string(static_cast<moegrad_status>(v));
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(std::strncmp(s, "MOEGRAD_STATUS_", 15), 0) << v;
  }
}

// The one-shot call refuses bad contents before writing grad_x too.
TEST(ApiMisuse, OneShotLeavesGradXUntouchedOnContentErrors) {
  ProblemSpec s;
  s.row_idx_type = 1, s.seed = 9;
  Problem p(s);
  ASSERT_GT(p.L, 1);
  p.idx.set_int(p.idx.offset({0}), p.M + 5);  // out of range
  p.grad_x.fill_words(0x7FC0DEADu);
  const auto before = p.grad_x.snapshot();
  EXPECT_EQ(moegrad_grad_x_run(p.args_ptr(), nullptr), MOEGRAD_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(p.grad_x.snapshot(), before);
}

}  // namespace
}  // namespace mgh
