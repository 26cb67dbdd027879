// The public API around the operator: version, status strings, ISA queries,
// the thread-local error message, contexts and their environment defaults,
// executor lifecycle and workspace, NULL contexts, and the C++ RAII layer.
#include <moegrad/moegrad.h>
#include <moegrad/moegrad.hpp>

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu_affinity.h"
#include "problem.h"
#include "reference.h"
#include "runner.h"
#include "runtime/cgroup_cpu_limit.h"
#include "runtime/cpu_features.h"

namespace mgt {
namespace {

TEST(Api, Version) {
  EXPECT_STREQ(moegrad_version(), "0.1.0");
  EXPECT_STREQ(moegrad_version(), MOEGRAD_VERSION_STRING);
  EXPECT_EQ(std::to_string(MOEGRAD_VERSION_MAJOR) + "." + std::to_string(MOEGRAD_VERSION_MINOR) + "." +
                std::to_string(MOEGRAD_VERSION_PATCH),
            MOEGRAD_VERSION_STRING);
}

TEST(Api, StatusStringsNameEveryStatus) {
  struct Named {
    moegrad_status status;
    const char* name;
  };
  const Named all[] = {
      {MOEGRAD_STATUS_SUCCESS, "MOEGRAD_STATUS_SUCCESS"},
      {MOEGRAD_STATUS_NULL_POINTER, "MOEGRAD_STATUS_NULL_POINTER"},
      {MOEGRAD_STATUS_WORKSPACE_TOO_SMALL, "MOEGRAD_STATUS_WORKSPACE_TOO_SMALL"},
      {MOEGRAD_STATUS_EXECUTOR_USED, "MOEGRAD_STATUS_EXECUTOR_USED"},
      {MOEGRAD_STATUS_INVALID_ARGUMENT, "MOEGRAD_STATUS_INVALID_ARGUMENT"},
      {MOEGRAD_STATUS_BAD_RANK, "MOEGRAD_STATUS_BAD_RANK"},
      {MOEGRAD_STATUS_BAD_DTYPE, "MOEGRAD_STATUS_BAD_DTYPE"},
      {MOEGRAD_STATUS_DTYPE_MISMATCH, "MOEGRAD_STATUS_DTYPE_MISMATCH"},
      {MOEGRAD_STATUS_N_MISMATCH, "MOEGRAD_STATUS_N_MISMATCH"},
      {MOEGRAD_STATUS_GROUP_COUNT_MISMATCH, "MOEGRAD_STATUS_GROUP_COUNT_MISMATCH"},
      {MOEGRAD_STATUS_GRAD_X_SHAPE, "MOEGRAD_STATUS_GRAD_X_SHAPE"},
      {MOEGRAD_STATUS_EMPTY_DIMENSION, "MOEGRAD_STATUS_EMPTY_DIMENSION"},
      {MOEGRAD_STATUS_BAD_BATCH, "MOEGRAD_STATUS_BAD_BATCH"},
      {MOEGRAD_STATUS_BAD_TOP_K, "MOEGRAD_STATUS_BAD_TOP_K"},
      {MOEGRAD_STATUS_BAD_ROW_IDX_TYPE, "MOEGRAD_STATUS_BAD_ROW_IDX_TYPE"},
      {MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE, "MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE"},
      {MOEGRAD_STATUS_SIZE_OVERFLOW, "MOEGRAD_STATUS_SIZE_OVERFLOW"},
      {MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT, "MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT"},
      {MOEGRAD_STATUS_GROUP_SUM_MISMATCH, "MOEGRAD_STATUS_GROUP_SUM_MISMATCH"},
      {MOEGRAD_STATUS_CUMSUM_DECREASING, "MOEGRAD_STATUS_CUMSUM_DECREASING"},
      {MOEGRAD_STATUS_M_EXCEEDS_SLOTS, "MOEGRAD_STATUS_M_EXCEEDS_SLOTS"},
      {MOEGRAD_STATUS_INDEX_TOO_SHORT, "MOEGRAD_STATUS_INDEX_TOO_SHORT"},
      {MOEGRAD_STATUS_INDEX_TOO_LONG, "MOEGRAD_STATUS_INDEX_TOO_LONG"},
      {MOEGRAD_STATUS_INDEX_OUT_OF_RANGE, "MOEGRAD_STATUS_INDEX_OUT_OF_RANGE"},
      {MOEGRAD_STATUS_DUPLICATE_INDEX, "MOEGRAD_STATUS_DUPLICATE_INDEX"},
      {MOEGRAD_STATUS_BAD_LAYOUT, "MOEGRAD_STATUS_BAD_LAYOUT"},
      {MOEGRAD_STATUS_UNSUPPORTED_DEVICE, "MOEGRAD_STATUS_UNSUPPORTED_DEVICE"},
      {MOEGRAD_STATUS_ISA_UNAVAILABLE, "MOEGRAD_STATUS_ISA_UNAVAILABLE"},
      {MOEGRAD_STATUS_OUT_OF_MEMORY, "MOEGRAD_STATUS_OUT_OF_MEMORY"},
      {MOEGRAD_STATUS_INTERNAL, "MOEGRAD_STATUS_INTERNAL"},
  };
  std::set<std::string> seen;
  for (const Named& n : all) {
    const char* s = moegrad_status_string(n.status);
    ASSERT_NE(s, nullptr) << n.name;
    EXPECT_EQ(std::string(s).rfind(n.name, 0), 0u) << "\"" << s << "\" should start with " << n.name;
    EXPECT_GT(std::strlen(s), std::strlen(n.name)) << n.name << " has no explanation";
    EXPECT_TRUE(seen.insert(s).second) << "duplicate string " << s;
  }
  const char* unknown = moegrad_status_string(static_cast<moegrad_status>(12345));
  ASSERT_NE(unknown, nullptr);
  EXPECT_GT(std::strlen(unknown), 0u);
}

TEST(Api, IsaNamesAndAvailability) {
  EXPECT_STREQ(moegrad_isa_name(MOEGRAD_ISA_AUTO), "auto");
  EXPECT_STREQ(moegrad_isa_name(MOEGRAD_ISA_SCALAR), "scalar");
  EXPECT_STREQ(moegrad_isa_name(MOEGRAD_ISA_AVX2), "avx2");
  EXPECT_STREQ(moegrad_isa_name(MOEGRAD_ISA_AVX512), "avx512");
  EXPECT_EQ(moegrad_isa_available(MOEGRAD_ISA_AUTO), 1);
  EXPECT_EQ(moegrad_isa_available(MOEGRAD_ISA_SCALAR), 1);
  EXPECT_EQ(moegrad_isa_available(static_cast<moegrad_isa>(42)), 0);
  // What the library detected (cpu_features_test holds that to libgcc's
  // reading of this CPU).
  const moegrad::runtime::CpuFeatures& cpu = moegrad::runtime::cpu_features();
  EXPECT_EQ(moegrad_isa_available(MOEGRAD_ISA_AVX2) != 0, cpu.avx2);
  EXPECT_EQ(moegrad_isa_available(MOEGRAD_ISA_AVX512) != 0, cpu.avx512f);
}

TEST(Api, LastErrorMessageIsThreadLocal) {
  std::string before, after, other_thread;
  std::thread([&] {
    before = moegrad_last_error_message();
    EXPECT_EQ(moegrad_context_create(nullptr), MOEGRAD_STATUS_NULL_POINTER);
    after = moegrad_last_error_message();
  }).join();
  std::thread([&] { other_thread = moegrad_last_error_message(); }).join();
  EXPECT_EQ(before, "") << "a fresh thread has no message";
  EXPECT_NE(after, "") << "a failed call leaves a message";
  EXPECT_EQ(other_thread, "") << "another thread's failure is not visible";
}

// The header: a successful setter or getter keeps the last failure's
// message; a successful plan and run clear it.
TEST(Api, LastErrorMessageSurvivesSettersAndIsClearedBySuccessfulRuns) {
  std::thread([] {
    EXPECT_EQ(moegrad_context_create(nullptr), MOEGRAD_STATUS_NULL_POINTER);
    const std::string failure = moegrad_last_error_message();
    ASSERT_NE(failure, "");
    moegrad_context* ctx = nullptr;
    ASSERT_EQ(moegrad_context_create(&ctx), MOEGRAD_STATUS_SUCCESS);
    int32_t threads = 0;
    EXPECT_EQ(moegrad_context_set_num_threads(ctx, 1), MOEGRAD_STATUS_SUCCESS);
    EXPECT_EQ(moegrad_context_get_num_threads(ctx, &threads), MOEGRAD_STATUS_SUCCESS);
    EXPECT_EQ(moegrad_last_error_message(), failure);
    const Problem p(make_spec({.batch = 3, .top_k = 1, .experts = 1, .K = 2, .N = 2}));
    HostTensor gx = p.make_grad_x();
    Call call(p, gx);
    EXPECT_EQ(moegrad_grad_x_run(&call.args, ctx), MOEGRAD_STATUS_SUCCESS);
    EXPECT_STREQ(moegrad_last_error_message(), "");
    moegrad_context_destroy(ctx);
  }).join();
}

// ---- contexts -----------------------------------------------------------------------

// The default thread count (README "Threads"): one per CPU the creating
// thread may use, at most a cgroup CPU limit rounded up (and at least 1).
// The affinity mask is read here directly; the limit's parsing has its own
// tests (cgroup_cpu_limit_test, cgroup_limit_test.sh). Without the limit a
// container run with --cpus would fail these tests though the library is right.
int64_t default_thread_count() {
  const auto affinity = static_cast<int64_t>(moegrad::test::allowed_cpus().size());
  const std::optional<double> limit = moegrad::runtime::cgroup_cpu_limit();
  if (!limit || affinity == 0) return affinity;
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(*limit)), 1, affinity);
}

TEST(Context, DefaultsWithoutEnvironment) {
  ScopedEnv threads("MOEGRAD_NUM_THREADS", std::nullopt);
  ScopedEnv isa("MOEGRAD_ISA", std::nullopt);
  moegrad::Context ctx;
  EXPECT_EQ(ctx.num_threads(), default_thread_count());
  EXPECT_EQ(ctx.isa(), fastest_isa()) << "got " << isa_label(ctx.isa());
}

// Under taskset or a cpuset the default follows the affinity mask, not the
// online CPUs: a pool of every online CPU would time-slice on the few it may
// use. Checked on a thread pinned to one CPU, and to two where there are.
TEST(Context, DefaultThreadsFollowTheAffinityMask) {
  ScopedEnv threads("MOEGRAD_NUM_THREADS", std::nullopt);
  const std::vector<int> cpus = moegrad::test::allowed_cpus();
  if (cpus.empty()) GTEST_SKIP() << "the affinity mask cannot be read";
  // A cgroup CPU limit of at most 1 CPU narrows the count to 1
  // (cgroup_cpu_limit_test, cgroup_limit_test.sh).
  const std::optional<double> limit = moegrad::runtime::cgroup_cpu_limit();
  for (size_t n = 1; n <= std::min<size_t>(2, cpus.size()); ++n) {
    if (limit && *limit <= static_cast<double>(n - 1)) GTEST_SKIP() << "a cgroup CPU limit of " << *limit;
    int32_t got = -1, after_reset = -1;
    if (!moegrad::test::run_pinned({cpus.begin(), cpus.begin() + static_cast<ptrdiff_t>(n)}, [&] {
      moegrad::Context ctx;
      got = ctx.num_threads();
      ctx.set_num_threads(7);
      ctx.set_num_threads(0);
      after_reset = ctx.num_threads();
        }))
      GTEST_SKIP() << "a thread's affinity cannot be set here";
    EXPECT_EQ(got, static_cast<int32_t>(n));
    EXPECT_EQ(after_reset, static_cast<int32_t>(n)) << "0 restores the default the context was created with";
  }
  // With one CPU online a mask of one is no narrower than the online count.
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "one online CPU: the old and new counts agree";
}

TEST(Context, EnvironmentDefaults) {
  {
    ScopedEnv threads("MOEGRAD_NUM_THREADS", "3");
    EXPECT_EQ(moegrad::Context().num_threads(), 3);
  }
  for (moegrad_isa want : explicit_isas()) {
    if (!moegrad_isa_available(want)) continue;
    ScopedEnv isa("MOEGRAD_ISA", isa_label(want));
    EXPECT_EQ(moegrad::Context().isa(), want) << isa_label(want);
  }
  ScopedEnv isa("MOEGRAD_ISA", "auto");
  EXPECT_EQ(moegrad::Context().isa(), fastest_isa());
}

// grad_x = 2^-133 (the smallest bf16 denormal) times 1.0: 2^-133 in the
// exact mode, +0 in the fast bf16 one, which reads denormal inputs as zero.
Problem smallest_denormal_times_one() {
  ProblemSpec s = make_spec({.batch = 1, .top_k = 1, .experts = 1, .K = 1, .N = 2});
  s.dtype = DType::kBF16;
  s.values = Values::kSmallInt;
  Problem p(s);
  p.grad_y.set_float(p.grad_y.offset({0, 0}), std::ldexp(1.0f, -133));
  p.grad_y.set_float(p.grad_y.offset({0, 1}), 0.0f);
  for (int64_t n = 0; n < 2; ++n) p.weight.set_float(p.weight.offset({0, 0, n}), 1.0f);
  return p;
}

// The mode a context computes in, from what it computes.
bool computes_fast_bf16(const moegrad_context* ctx) {
  const Problem p = smallest_denormal_times_one();
  HostTensor gx = p.make_grad_x();
  Call call(p, gx);
  EXPECT_EQ(moegrad_grad_x_run(&call.args, ctx), MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
  return std::bit_cast<uint32_t>(read_matrix_f32(gx)[0]) == 0u;
}

TEST(Context, SettersAndGetters) {
  ScopedEnv threads("MOEGRAD_NUM_THREADS", std::nullopt);
  ScopedEnv isa("MOEGRAD_ISA", std::nullopt);
  moegrad::Context ctx;
  ctx.set_num_threads(5);
  EXPECT_EQ(ctx.num_threads(), 5);
  ctx.set_num_threads(0);
  EXPECT_EQ(ctx.num_threads(), default_thread_count()) << "0 restores the default";
  ctx.set_isa(MOEGRAD_ISA_SCALAR);
  EXPECT_EQ(ctx.isa(), MOEGRAD_ISA_SCALAR);
  ctx.set_isa(MOEGRAD_ISA_AUTO);
  EXPECT_EQ(ctx.isa(), fastest_isa()) << "AUTO restores the automatic choice, never reported as AUTO";
  ctx.set_isa(MOEGRAD_ISA_SCALAR);  // the one path that runs both modes on every CPU
  EXPECT_FALSE(computes_fast_bf16(ctx.get())) << "the exact mode is the default";
  ctx.set_fast_bf16(true);
  EXPECT_TRUE(computes_fast_bf16(ctx.get()));
  ctx.set_fast_bf16(false);
  EXPECT_FALSE(computes_fast_bf16(ctx.get()));
}

// The two "defaults" differ on purpose: 0 threads restores the count the
// environment gave, AUTO is the best path whatever the environment forced.
TEST(Context, ZeroThreadsKeepsTheEnvironmentAutoIsaDoesNot) {
  ScopedEnv threads("MOEGRAD_NUM_THREADS", "3");
  ScopedEnv isa("MOEGRAD_ISA", "scalar");
  moegrad::Context ctx;
  EXPECT_EQ(ctx.isa(), MOEGRAD_ISA_SCALAR);
  ctx.set_num_threads(5);
  ctx.set_num_threads(0);
  EXPECT_EQ(ctx.num_threads(), 3);
  ctx.set_isa(MOEGRAD_ISA_AUTO);
  EXPECT_EQ(ctx.isa(), fastest_isa());
}

TEST(Context, NullPointers) {
  EXPECT_EQ(moegrad_context_create(nullptr), MOEGRAD_STATUS_NULL_POINTER);
  int32_t n = 0;
  moegrad_isa isa = MOEGRAD_ISA_AUTO;
  EXPECT_EQ(moegrad_context_set_num_threads(nullptr, 1), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_get_num_threads(nullptr, &n), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_set_isa(nullptr, MOEGRAD_ISA_SCALAR), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_get_isa(nullptr, &isa), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_set_fast_bf16(nullptr, 1), MOEGRAD_STATUS_NULL_POINTER);
  auto ctx = make_context();
  EXPECT_EQ(moegrad_context_get_num_threads(ctx.get(), nullptr), MOEGRAD_STATUS_NULL_POINTER);
  EXPECT_EQ(moegrad_context_get_isa(ctx.get(), nullptr), MOEGRAD_STATUS_NULL_POINTER);
  moegrad_context_destroy(nullptr);    // no-op
  moegrad_executor_destroy(nullptr);   // no-op
}

TEST(Context, MoveKeepsTheContext) {
  moegrad::Context a;
  a.set_num_threads(3);
  moegrad::Context b(std::move(a));
  EXPECT_EQ(b.num_threads(), 3);
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): what a move leaves
  moegrad::Context c;
  c.set_num_threads(2);
  c = std::move(b);
  EXPECT_EQ(c.num_threads(), 3);
  // Move assignment releases c's own context: it used to swap, so b went on
  // holding c's two-thread context (and its pool) until b was destroyed.
  EXPECT_EQ(b.get(), nullptr);  // NOLINT(bugprone-use-after-move)
  moegrad::Context& same = c;
  c = std::move(same);
  EXPECT_EQ(c.num_threads(), 3) << "a self-move keeps the context";
}

// ---- executor lifecycle and workspace --------------------------------------------

ProblemSpec api_spec(int32_t type) {
  ProblemSpec s = make_spec({.batch = 50, .top_k = 2, .experts = 5, .K = 80, .N = 96}, type, 0.9, 50);
  s.values = Values::kSmallInt;
  return s;
}

TEST(Executor, NullContextUsesTheDefault) {
  for (int32_t type : {0, 1}) {
    const Problem p(api_spec(type));
    const auto want = reference_contract_order(p);
    for (bool one_shot : {false, true}) {
      HostTensor gx = p.make_grad_x();
      Call call(p, gx);
      RunOptions o;
      o.one_shot = one_shot;
      const Outcome out = run_call(call.args, nullptr, o);
      ASSERT_TRUE(out.ok()) << out.describe();
      EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, describe(p, o) + " with ctx NULL"));
    }
  }
}

// "Tensors must stay valid (the structs need not)": the args struct, the
// DLTensor structs and their shape/stride arrays may be gone by the run.
TEST(Executor, ArgumentStructsNeedNotOutliveThePlan) {
  for (int32_t type : {0, 1}) {
    Layout strided;
    strided.grad_y_row_pad = 3;
    strided.grad_x_row_pad = 2;
    const Problem p(api_spec(type), strided);
    const auto want = reference_contract_order(p);
    HostTensor gx = p.make_grad_x();
    auto ctx = make_context();
    size_t ws = 0;
    moegrad_executor* raw = nullptr;
    {
      auto call = std::make_unique<Call>(p, gx);
      // Private copies of the shape/stride arrays, scribbled over after planning.
      std::vector<std::vector<int64_t>> arrays;
      for (DLTensor* t : {&call->grad_y, &call->weight, &call->idx, &call->group_list, &call->grad_x}) {
        arrays.emplace_back(t->shape, t->shape + t->ndim);
        t->shape = arrays.back().data();
        if (t->strides) {
          arrays.emplace_back(t->strides, t->strides + t->ndim);
          t->strides = arrays.back().data();
        }
      }
      ASSERT_EQ(moegrad_grad_x_get_workspace_size(&call->args, ctx.get(), &ws, &raw), MOEGRAD_STATUS_SUCCESS)
          << moegrad_last_error_message();
      for (auto& a : arrays) std::fill(a.begin(), a.end(), -77);
      std::memset(static_cast<void*>(call.get()), 0xCD, sizeof(Call));
    }
    ExecutorPtr ex(raw);
    std::vector<unsigned char> buffer(ws + 1);
    ASSERT_EQ(moegrad_grad_x(buffer.data(), ws, ex.get(), ctx.get()), MOEGRAD_STATUS_SUCCESS)
        << moegrad_last_error_message();
    EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, p.describe()));
  }
}

// The run uses the planning context's ISA and "at most as many threads as
// were planned"; more or fewer threads at run time must still work.
TEST(Executor, RunContextMayDifferFromThePlanningOne) {
  const Problem p(api_spec(1));
  const auto want = reference_contract_order(p);
  for (auto [plan_threads, run_threads] : {std::pair{1, 8}, std::pair{8, 1}, std::pair{2, 3}}) {
    HostTensor gx = p.make_grad_x();
    Call call(p, gx);
    auto plan_ctx = make_context(MOEGRAD_ISA_SCALAR, plan_threads);
    auto run_ctx = make_context(fastest_isa(), run_threads);
    size_t ws = 0;
    moegrad_executor* raw = nullptr;
    ASSERT_EQ(moegrad_grad_x_get_workspace_size(&call.args, plan_ctx.get(), &ws, &raw), MOEGRAD_STATUS_SUCCESS);
    ExecutorPtr ex(raw);
    std::vector<unsigned char> buffer(ws + 1);
    ASSERT_EQ(moegrad_grad_x(buffer.data(), ws, ex.get(), run_ctx.get()), MOEGRAD_STATUS_SUCCESS)
        << moegrad_last_error_message();
    EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K,
                              "planned with " + std::to_string(plan_threads) + " threads, run with " +
                                  std::to_string(run_threads)));
  }
}

// The numeric mode, which unlike the ISA changes bits, is the planning
// context's too: grad_y = 2^-133 (the smallest bf16 denormal) times 1.0 is
// 2^-133 in the exact mode and +0 in the fast one (vdpbf16ps reads denormal
// inputs as zero), whichever mode the run's context has.
TEST(Executor, TheNumericModeIsThePlanningContexts) {
  const Problem p = smallest_denormal_times_one();
  const float tiny = std::ldexp(1.0f, -133);
  for (bool plan_fast : {true, false}) {
    SCOPED_TRACE(plan_fast ? "planned fast, run exact" : "planned exact, run fast");
    HostTensor gx = p.make_grad_x();
    Call call(p, gx);
    auto plan_ctx = make_context(MOEGRAD_ISA_SCALAR, 1, plan_fast);
    auto run_ctx = make_context(MOEGRAD_ISA_SCALAR, 1, !plan_fast);
    size_t ws = 0;
    moegrad_executor* raw = nullptr;
    ASSERT_EQ(moegrad_grad_x_get_workspace_size(&call.args, plan_ctx.get(), &ws, &raw), MOEGRAD_STATUS_SUCCESS)
        << moegrad_last_error_message();
    ExecutorPtr ex(raw);
    std::vector<unsigned char> buffer(ws + 1);
    ASSERT_EQ(moegrad_grad_x(buffer.data(), ws, ex.get(), run_ctx.get()), MOEGRAD_STATUS_SUCCESS)
        << moegrad_last_error_message();
    const float got = read_matrix_f32(gx)[0];
    EXPECT_EQ(std::bit_cast<uint32_t>(got), plan_fast ? 0u : std::bit_cast<uint32_t>(tiny));
  }
}

TEST(Executor, DestroyWithoutRunning) {
  const Problem p(api_spec(0));
  HostTensor gx = p.make_grad_x();
  Call call(p, gx);
  size_t ws = 0;
  moegrad_executor* raw = nullptr;
  ASSERT_EQ(moegrad_grad_x_get_workspace_size(&call.args, nullptr, &ws, &raw), MOEGRAD_STATUS_SUCCESS);
  ASSERT_NE(raw, nullptr);
  moegrad_executor_destroy(raw);
  EXPECT_TRUE(gx.all_sentinel()) << "planning wrote grad_x";
}

// The reported size is exact and the only memory of size the run uses: the
// workspace ends right before a PROT_NONE page, so reading or writing past
// it faults. It is bounded by 8*L bytes plus a few MiB (SPEC §6), with a
// fixed 4 threads: each worker adds its own regions, whatever the CPU count.
TEST(Executor, WorkspaceIsExactAndBounded) {
  const long page = sysconf(_SC_PAGESIZE);
  for (int32_t type : {0, 1}) {
    ProblemSpec s = api_spec(type);
    s.routing.batch = 700;
    const Problem p(s);
    const auto want = reference_contract_order(p);
    HostTensor gx = p.make_grad_x();
    Call call(p, gx);
    auto ctx = make_context(MOEGRAD_ISA_AUTO, 4);
    size_t ws = 0;
    moegrad_executor* raw = nullptr;
    ASSERT_EQ(moegrad_grad_x_get_workspace_size(&call.args, ctx.get(), &ws, &raw), MOEGRAD_STATUS_SUCCESS);
    ExecutorPtr ex(raw);
    EXPECT_LE(ws, 8 * static_cast<size_t>(p.routing.L()) + (size_t{8} << 20)) << p.describe();

    const size_t pages = (ws + static_cast<size_t>(page) - 1) / static_cast<size_t>(page) + 1;
    void* region = mmap(nullptr, pages * static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(region, MAP_FAILED);
    auto* guard = static_cast<unsigned char*>(region) + (pages - 1) * static_cast<size_t>(page);
    ASSERT_EQ(mprotect(guard, static_cast<size_t>(page), PROT_NONE), 0);
    void* workspace = ws == 0 ? nullptr : guard - ws;
    EXPECT_EQ(moegrad_grad_x(workspace, ws, ex.get(), ctx.get()), MOEGRAD_STATUS_SUCCESS)
        << moegrad_last_error_message();
    munmap(region, pages * static_cast<size_t>(page));
    EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, p.describe()));
  }
}

// One token and one grad_x column are one work item however the plan tiles
// them, so a run uses one worker whatever the context's threads: 64 threads
// must not make the workspace any larger than one does (README "Workspace").
// The 64-thread plan still runs to the same bits.
TEST(Executor, WorkspaceDoesNotGrowPastTheWorkItems) {
  for (int32_t type : {0, 1}) {
    const Problem p(make_spec({.batch = 1, .top_k = 4, .experts = 3, .K = 1, .N = 37}, type));
    const auto want = reference_contract_order(p);
    size_t ws[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const int32_t threads = i == 0 ? 1 : 64;
      SCOPED_TRACE("type " + std::to_string(type) + ", " + std::to_string(threads) + " threads");
      HostTensor gx = p.make_grad_x();
      Call call(p, gx);
      auto ctx = make_context(MOEGRAD_ISA_AUTO, threads);
      moegrad_executor* raw = nullptr;
      ASSERT_EQ(moegrad_grad_x_get_workspace_size(&call.args, ctx.get(), &ws[i], &raw), MOEGRAD_STATUS_SUCCESS);
      ExecutorPtr ex(raw);
      std::vector<std::byte> workspace(ws[i]);
      ASSERT_EQ(moegrad_grad_x(workspace.data(), ws[i], ex.get(), ctx.get()), MOEGRAD_STATUS_SUCCESS)
          << moegrad_last_error_message();
      EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, p.describe()));
    }
    EXPECT_EQ(ws[1], ws[0]) << "64 threads, one work item";
  }
}

// ---- C++ layer ----------------------------------------------------------------------

TEST(Cpp, ExecutorAndOneShotMatchTheCApi) {
  const Problem p(api_spec(1));
  const auto want = reference_contract_order(p);
  moegrad::Context ctx;
  ctx.set_num_threads(2);
  {
    HostTensor gx = p.make_grad_x();
    Call call(p, gx);
    moegrad::GradXExecutor ex(call.args, ctx);
    moegrad::GradXExecutor moved(std::move(ex));
    std::vector<std::byte> ws(moved.workspace_bytes());
    moved.run(ws.data(), ws.size(), ctx);
    EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, "moegrad::GradXExecutor"));
    try {
      moved.run(ws.data(), ws.size(), ctx);
      ADD_FAILURE() << "a second run did not throw";
    } catch (const moegrad::Error& e) {
      EXPECT_EQ(e.status(), MOEGRAD_STATUS_EXECUTOR_USED);
    }
  }
  {
    HostTensor gx = p.make_grad_x();
    Call call(p, gx);
    moegrad::grad_x(call.args, ctx);
    EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, "moegrad::grad_x"));
  }
}

// Without a context, the wrappers plan and run on the library's default
// context (the C API's NULL); Context::default_context() names it, and its
// settings cannot be read or set through the wrapper (NULL_POINTER). get()
// gives a const context through a const Context, as the C API's runs take.
static_assert(std::is_same<decltype(std::declval<const moegrad::Context&>().get()), const moegrad_context*>::value,
              "a const Context yields a const moegrad_context*");
static_assert(std::is_same<decltype(std::declval<moegrad::Context&>().get()), moegrad_context*>::value,
              "a Context yields a moegrad_context* its setters take");
TEST(Cpp, WithoutAContextCallsRunOnTheDefaultContext) {
  const Problem p(api_spec(1));
  const auto want = reference_contract_order(p);
  {
    HostTensor gx = p.make_grad_x();
    Call call(p, gx);
    moegrad::GradXExecutor ex(call.args);
    std::vector<std::byte> ws(ex.workspace_bytes());
    ex.run(ws.data(), ws.size());
    EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, "GradXExecutor(args).run(ws, bytes)"));
  }
  {
    HostTensor gx = p.make_grad_x();
    Call call(p, gx);
    moegrad::grad_x(call.args);
    EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, "moegrad::grad_x(args)"));
  }
  moegrad::Context none = moegrad::Context::default_context();
  EXPECT_EQ(none.get(), nullptr);
  {
    HostTensor gx = p.make_grad_x();
    Call call(p, gx);
    moegrad::grad_x(call.args, none);
    EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, "moegrad::grad_x(args, default_context())"));
  }
  try {
    none.set_num_threads(2);
    ADD_FAILURE() << "a setter on the default context's stand-in did not throw";
  } catch (const moegrad::Error& e) {
    EXPECT_EQ(e.status(), MOEGRAD_STATUS_NULL_POINTER) << e.what();
  }
}

// A moved-from executor, by construction or assignment, holds no plan: it
// reports no workspace and its run throws NULL_POINTER, writing nothing.
// Assignment used to swap, so the source ran the target's old plan.
TEST(Cpp, AMovedFromExecutorHoldsNoPlan) {
  const Problem p(api_spec(1));
  const auto want = reference_contract_order(p);
  moegrad::Context ctx;
  HostTensor gx = p.make_grad_x(), other_gx = p.make_grad_x();
  Call call(p, gx), other(p, other_gx);
  moegrad::GradXExecutor a(call.args, ctx), b(other.args, ctx);
  ASSERT_GT(a.workspace_bytes(), 0u);
  b = std::move(a);
  EXPECT_EQ(a.workspace_bytes(), 0u);  // NOLINT(bugprone-use-after-move)
  std::vector<std::byte> ws(b.workspace_bytes());
  try {
    a.run(ws.data(), ws.size(), ctx);  // NOLINT(bugprone-use-after-move)
    ADD_FAILURE() << "a moved-from executor ran";
  } catch (const moegrad::Error& e) {
    EXPECT_EQ(e.status(), MOEGRAD_STATUS_NULL_POINTER) << e.what();
  }
  EXPECT_TRUE(gx.all_sentinel() && other_gx.all_sentinel()) << "a failed run wrote grad_x";
  moegrad::GradXExecutor& same = b;
  b = std::move(same);
  b.run(ws.data(), ws.size(), ctx);
  EXPECT_TRUE(bitwise_equal(read_matrix_f32(gx), want, p.K, "the plan moved into b, after a self-move"));
  EXPECT_TRUE(other_gx.all_sentinel()) << "b's own plan, released by the move, ran";
  moegrad::GradXExecutor c(std::move(b));
  EXPECT_EQ(b.workspace_bytes(), 0u);  // NOLINT(bugprone-use-after-move)
}

// The plain queries a wrapper-only program needs, against what the header
// and the README say they return.
TEST(Cpp, PlainQueries) {
  EXPECT_STREQ(moegrad::version(), MOEGRAD_VERSION_STRING);
  EXPECT_EQ(std::string(moegrad::status_string(MOEGRAD_STATUS_N_MISMATCH)).rfind("MOEGRAD_STATUS_N_MISMATCH: ", 0), 0u);
  EXPECT_STREQ(moegrad::isa_name(MOEGRAD_ISA_AVX2), "avx2");
  EXPECT_TRUE(moegrad::isa_available(MOEGRAD_ISA_AUTO));
  EXPECT_TRUE(moegrad::isa_available(MOEGRAD_ISA_SCALAR));
  // cpu_features_test holds detection to libgcc's; here the wrapper to it.
  EXPECT_EQ(moegrad::isa_available(MOEGRAD_ISA_AVX512), moegrad::runtime::cpu_features().avx512f);
}

TEST(Cpp, ErrorsThrowWithStatusAndMessage) {
  const Problem p(api_spec(0));
  HostTensor gx = p.make_grad_x();
  Call call(p, gx);
  call.args.top_k = 0;
  moegrad::Context ctx;
  try {
    moegrad::grad_x(call.args, ctx);
    ADD_FAILURE() << "no exception";
  } catch (const moegrad::Error& e) {
    EXPECT_EQ(e.status(), MOEGRAD_STATUS_BAD_TOP_K);
    EXPECT_STREQ(e.what(), moegrad_last_error_message());
    EXPECT_NE(std::string(e.what()).find("top_k"), std::string::npos) << e.what();
  }
  try {
    moegrad::GradXExecutor ex(call.args, ctx);
    ADD_FAILURE() << "no exception";
  } catch (const moegrad::Error& e) {
    EXPECT_EQ(e.status(), MOEGRAD_STATUS_BAD_TOP_K);
  }
  EXPECT_THROW(ctx.set_num_threads(-3), moegrad::Error);
  EXPECT_TRUE(gx.all_sentinel());
}

}  // namespace
}  // namespace mgt
