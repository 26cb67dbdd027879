// SPEC §6: "the run uses nothing else of size on the hot path" - a run on a
// warmed-up context allocates nothing beyond the workspace the caller passes
// (the context's thread pool is built when the context is created or
// resized, by design). And where the library does allocate (the one-shot
// call's workspace, a context's thread pool), a failed allocation is
// MOEGRAD_STATUS_OUT_OF_MEMORY with outputs and settings untouched.
//
// This binary replaces every global operator new/delete and, when no
// sanitizer owns the allocator, interposes malloc/calloc/realloc/memalign
// too (forwarding to glibc's __libc_* functions), counting calls from every
// thread - the pool's workers included - while armed; operator new also
// fails on request (from a size up, or after a number of calls).
#include <moegrad/moegrad.h>
#include <moegrad/moegrad_layer.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "problem.h"
#include "reference.h"
#include "runner.h"
#include "scoped_env.h"
#include "tensor.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MGH_SANITIZED_ALLOCATOR 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MGH_SANITIZED_ALLOCATOR 1
#endif

namespace {

std::atomic<bool> g_armed{false};
std::atomic<long> g_news{0};
std::atomic<long> g_mallocs{0};
// Failures on request: every operator new of at least this many bytes, and
// (when >= 0) every one after this many more have succeeded.
std::atomic<size_t> g_fail_from_bytes{SIZE_MAX};
std::atomic<long> g_fail_after{-1};

// Counts an operator new call while armed; true when it must fail.
bool note_new(size_t n) {
  if (g_armed.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  if (n >= g_fail_from_bytes.load(std::memory_order_relaxed)) return true;
  long left = g_fail_after.load(std::memory_order_relaxed);
  while (left > 0 && !g_fail_after.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
  }
  return left == 0;
}

void* checked(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

#ifndef MGH_SANITIZED_ALLOCATOR
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

static void note_malloc() {
  if (g_armed.load(std::memory_order_relaxed)) g_mallocs.fetch_add(1, std::memory_order_relaxed);
}
void* malloc(size_t n) noexcept {
  note_malloc();
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) noexcept {
  note_malloc();
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) noexcept {
  note_malloc();
  return __libc_realloc(p, n);
}
void* memalign(size_t al, size_t n) noexcept {
  note_malloc();
  return __libc_memalign(al, n);
}
void* aligned_alloc(size_t al, size_t n) noexcept {
  note_malloc();
  return __libc_memalign(al, n);
}
int posix_memalign(void** out, size_t al, size_t n) noexcept {
  note_malloc();
  void* p = __libc_memalign(al, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) noexcept { __libc_free(p); }
}  // extern "C"
#endif

void* operator new(size_t n) { return checked(note_new(n) ? nullptr : std::malloc(n == 0 ? 1 : n)); }
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return note_new(n) ? nullptr : std::malloc(n == 0 ? 1 : n); }
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  if (note_new(n)) return nullptr;
  return std::aligned_alloc(static_cast<size_t>(a), round_up(n == 0 ? 1 : n, static_cast<size_t>(a)));
}
void* operator new(size_t n, std::align_val_t a) { return checked(operator new(n, a, std::nothrow)); }
void* operator new[](size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept { return operator new(n, a, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace mgh {
namespace {

struct Counts {
  long news = 0, mallocs = 0;
};

// Runs `fn` with the counters armed.
template <typename Fn>
Counts counted(Fn fn) {
  g_news = 0;
  g_mallocs = 0;
  g_armed = true;
  fn();
  g_armed = false;
  return {g_news.load(), g_mallocs.load()};
}

TEST(NoAllocation, CountersSeeAllocations) {
  // The hooks work at all (otherwise a zero below would prove nothing).
  const Counts c = counted([] {
    int* volatile p = new int(3);  // volatile: the pair cannot be elided
    delete p;
  });
  EXPECT_EQ(c.news, 1);
#ifndef MGH_SANITIZED_ALLOCATOR
  EXPECT_GE(c.mallocs, 1);
  const Counts m = counted([] {
    void* volatile p = std::malloc(24);
    std::free(p);
  });
  EXPECT_EQ(m.mallocs, 1);
#endif
}

ProblemSpec medium(int32_t type, DLDataType dtype) {
  ProblemSpec s;
  s.batch = 40, s.top_k = 2, s.G = 5, s.N = 70, s.K = 300;  // several column blocks and token chunks
  s.row_idx_type = type, s.dtype = dtype, s.values = Values::kUniform, s.seed = 77 + type;
  s.gx_layout = type ? Layout::kPadded : Layout::kCompact;
  return s;
}

// Plans one executor and runs it (a warm-up run first, on another executor).
void expect_no_allocation(const moegrad_context* ctx, Problem& p, const std::string& what) {
  size_t bytes = 0;
  moegrad_executor* raw = nullptr;
  ASSERT_EQ(moegrad_grad_x_get_workspace_size(p.args_ptr(), ctx, &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
  ExecutorPtr warm = own(raw);
  Workspace ws = make_workspace(bytes, 3, {0xA5});
  ASSERT_EQ(moegrad_grad_x(ws.ptr, ws.bytes, warm.get(), ctx), MOEGRAD_STATUS_SUCCESS);

  ASSERT_EQ(moegrad_grad_x_get_workspace_size(p.args_ptr(), ctx, &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
  ExecutorPtr ex = own(raw);
  p.grad_x.fill_words(0x7FC0DEADu);
  moegrad_status st = MOEGRAD_STATUS_INTERNAL;
  const Counts c = counted([&] { st = moegrad_grad_x(ws.ptr, ws.bytes, ex.get(), ctx); });
  ASSERT_EQ(st, MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
  EXPECT_EQ(c.news, 0) << "operator new calls during moegrad_grad_x: " << what;
  EXPECT_EQ(c.mallocs, 0) << "malloc-family calls during moegrad_grad_x: " << what;
  EXPECT_EQ(compare_bits(read_grad_x(p.grad_x.dl()), reference_contract(p.args()), p.spec.K), "") << what;
}

TEST(NoAllocation, RunOnWarmContext) {
  for (moegrad_isa isa : available_isas()) {
    for (int32_t threads : {1, 2, 4}) {
      moegrad::Context ctx = make_context(isa, threads);
      for (int32_t type : {0, 1}) {
        Problem p(medium(type, type ? kBF16 : kF32));
        expect_no_allocation(ctx.get(), p,
                             std::string(moegrad_isa_name(isa)) + " threads=" + std::to_string(threads) +
                                 " type=" + std::to_string(type));
      }
    }
  }
}

TEST(NoAllocation, RunOnDefaultContext) {
  Problem p(medium(0, kF16));
  expect_no_allocation(nullptr, p, "default context");
}

// Runs with fewer threads than planned (the run context is smaller).
TEST(NoAllocation, RunOnSmallerContextThanPlanned) {
  moegrad::Context plan_ctx = make_context(MOEGRAD_ISA_AUTO, 4);
  moegrad::Context run_ctx = make_context(MOEGRAD_ISA_AUTO, 2);
  Problem p(medium(1, kF32));
  size_t bytes = 0;
  moegrad_executor* raw = nullptr;
  ASSERT_EQ(moegrad_grad_x_get_workspace_size(p.args_ptr(), plan_ctx.get(), &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
  ExecutorPtr warm = own(raw);
  Workspace ws = make_workspace(bytes, 0, {0x00});
  ASSERT_EQ(moegrad_grad_x(ws.ptr, ws.bytes, warm.get(), run_ctx.get()), MOEGRAD_STATUS_SUCCESS);
  ASSERT_EQ(moegrad_grad_x_get_workspace_size(p.args_ptr(), plan_ctx.get(), &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
  ExecutorPtr ex = own(raw);
  moegrad_status st = MOEGRAD_STATUS_INTERNAL;
  const Counts c = counted([&] { st = moegrad_grad_x(ws.ptr, ws.bytes, ex.get(), run_ctx.get()); });
  ASSERT_EQ(st, MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
  EXPECT_EQ(c.news, 0);
  EXPECT_EQ(c.mallocs, 0);
}

// Reporting an error allocates nothing either: the message lives in a
// fixed per-thread buffer, so no std::bad_alloc can escape the C API, on
// the out-of-memory path least of all. A fresh thread each time: its first
// message is the one a growing string would have had to allocate for.
TEST(NoAllocation, AnErrorOnAFreshThread) {
  moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 1);
  for (int32_t bad : {-1, MOEGRAD_MAX_THREADS + 1}) {
    moegrad_status st = MOEGRAD_STATUS_SUCCESS;
    std::string message;
    Counts c;
    std::thread t([&] {
      c = counted([&] { st = moegrad_context_set_num_threads(ctx.get(), bad); });
      message = moegrad_last_error_message();
    });
    t.join();
    EXPECT_EQ(st, MOEGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(message.find(std::to_string(bad)), std::string::npos) << message;
    EXPECT_EQ(c.news, 0) << message;
    EXPECT_EQ(c.mallocs, 0) << message;
  }
}

// The one-shot call allocates its workspace; when it cannot, it says so,
// names the size, and leaves grad_x as it was.
TEST(OutOfMemory, AOneShotRunWithoutItsWorkspaceWritesNothing) {
  moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 2);
  Problem p(medium(0, kF32));
  size_t bytes = 0;
  moegrad_executor* raw = nullptr;
  ASSERT_EQ(moegrad_grad_x_get_workspace_size(p.args_ptr(), ctx.get(), &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
  own(raw);
  ASSERT_GT(bytes, 4096u) << "the executor's own allocations must stay below the failing size";
  p.grad_x.fill_words(0x7FC0DEADu);
  const std::vector<std::byte> before = p.grad_x.snapshot();
  g_fail_from_bytes = bytes;
  const moegrad_status st = moegrad_grad_x_run(p.args_ptr(), ctx.get());
  g_fail_from_bytes = SIZE_MAX;
  EXPECT_EQ(st, MOEGRAD_STATUS_OUT_OF_MEMORY);
  EXPECT_NE(std::string(moegrad_last_error_message()).find(std::to_string(bytes)), std::string::npos)
      << moegrad_last_error_message();
  EXPECT_TRUE(p.grad_x.snapshot() == before) << "grad_x was written";
  ASSERT_EQ(moegrad_grad_x_run(p.args_ptr(), ctx.get()), MOEGRAD_STATUS_SUCCESS) << "and works once memory is back";
  EXPECT_EQ(compare_bits(read_grad_x(p.grad_x.dl()), reference_contract(p.args()), p.spec.K), "");
}

// The layer operators' one-shot calls allocate their workspace the same
// way: when they cannot, the same status and message, and every output as
// it was. Each op is planned once for its size; then every allocation of
// that size or more fails during its one-shot call.
TEST(OutOfMemory, ALayerOpOneShotRunWithoutItsWorkspaceWritesNothing) {
  moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 2);
  constexpr int64_t kBatch = 96, kTopK = 2, kG = 4, kK = 72, kN = 40, kM = kBatch * kTopK;
  Rng rng(17);
  Tensor x(kF32, {kBatch, kK}), experts(kI64, {kBatch, kTopK}), weight(kF32, {kG, kK, kN});
  Tensor grad_y(kF32, {kM, kN}), grad_expanded_x(kF32, {kM, kK});
  for (Tensor* t : {&x, &weight, &grad_y, &grad_expanded_x})
    for (int64_t i = 0; i < t->numel(); ++i) t->set(t->offset_of_linear(i), static_cast<double>(rng.uniform(-4, 4)));
  for (int64_t i = 0; i < experts.numel(); ++i) experts.set_int(experts.offset_of_linear(i), rng.uniform(0, kG - 1));
  Tensor expanded_x(kF32, {kM, kK}), row_idx(kI64, {kM}), group_list(kI64, {kG});
  Tensor y(kF32, {kM, kN}), grad_weight(kF32, {kG, kK, kN}), grad_x(kF32, {kBatch, kK});

  const auto check = [&](const char* what, auto plan, auto run, std::vector<Tensor*> outputs) {
    SCOPED_TRACE(what);
    size_t bytes = 0;
    moegrad_op_executor* raw = nullptr;
    ASSERT_EQ(plan(&bytes, &raw), MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
    moegrad_op_executor_destroy(raw);
    ASSERT_GT(bytes, 0u);
    std::vector<std::vector<std::byte>> before;
    for (Tensor* t : outputs) {
      t->fill_words(0x7FC0DEADu);
      before.push_back(t->snapshot());
    }
    g_fail_from_bytes = bytes;
    const moegrad_status st = run();
    g_fail_from_bytes = SIZE_MAX;
    EXPECT_EQ(st, MOEGRAD_STATUS_OUT_OF_MEMORY);
    // The workspace's allocation failed, not one of the plan's own.
    EXPECT_NE(std::string(moegrad_last_error_message()).find(std::to_string(bytes) + "-byte workspace"),
              std::string::npos)
        << moegrad_last_error_message();
    for (size_t i = 0; i < outputs.size(); ++i) EXPECT_TRUE(outputs[i]->snapshot() == before[i]) << "output " << i;
    // ops_test checks the values; here only that the call works once memory is back.
    ASSERT_EQ(run(), MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
    for (size_t i = 0; i < outputs.size(); ++i) EXPECT_FALSE(outputs[i]->snapshot() == before[i]) << "output " << i;
  };

  const moegrad_moe_init_routing_args routing{&x.dl(), &experts.dl(), &expanded_x.dl(), &row_idx.dl(),
                                              &group_list.dl(), MOEGRAD_NO_LIMIT, MOEGRAD_NO_LIMIT,
                                              MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL, nullptr};
  check(
      "moe_init_routing",
      [&](size_t* b, moegrad_op_executor** e) { return moegrad_moe_init_routing_get_workspace_size(&routing, ctx.get(), b, e); },
      [&] { return moegrad_moe_init_routing_run(&routing, ctx.get()); }, {&expanded_x, &row_idx, &group_list});
  const moegrad_grouped_matmul_args forward{&expanded_x.dl(), &weight.dl(), &group_list.dl(), &y.dl(),
                                            MOEGRAD_GROUP_LIST_COUNT};
  check(
      "grouped_matmul",
      [&](size_t* b, moegrad_op_executor** e) { return moegrad_grouped_matmul_get_workspace_size(&forward, ctx.get(), b, e); },
      [&] { return moegrad_grouped_matmul_run(&forward, ctx.get()); }, {&y});
  const moegrad_grouped_matmul_weight_grad_args weight_grad{&expanded_x.dl(), &grad_y.dl(), &group_list.dl(),
                                                            &grad_weight.dl(), MOEGRAD_GROUP_LIST_COUNT, 0};
  check(
      "grouped_matmul_weight_grad",
      [&](size_t* b, moegrad_op_executor** e) {
        return moegrad_grouped_matmul_weight_grad_get_workspace_size(&weight_grad, ctx.get(), b, e);
      },
      [&] { return moegrad_grouped_matmul_weight_grad_run(&weight_grad, ctx.get()); }, {&grad_weight});
  const moegrad_moe_init_routing_grad_args routing_grad{&grad_expanded_x.dl(), &row_idx.dl(), &grad_x.dl(), kBatch,
                                                        kTopK, MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL};
  check(
      "moe_init_routing_grad",
      [&](size_t* b, moegrad_op_executor** e) {
        return moegrad_moe_init_routing_grad_get_workspace_size(&routing_grad, ctx.get(), b, e);
      },
      [&] { return moegrad_moe_init_routing_grad_run(&routing_grad, ctx.get()); }, {&grad_x});
}

// Creating a context reads its settings from the environment; an
// allocation that fails there is OUT_OF_MEMORY, never a C++ exception out
// of a C function (which a C caller cannot catch: it unwinds through C
// frames or terminates). Each setting is read with the n-th operator new
// failing, n = 0, 1, ... until the call gets as far as it can: success for
// valid values, INVALID_ARGUMENT (whose message lists the choices) for bad.
TEST(OutOfMemory, AContextThatCannotReadItsEnvironmentSaysSo) {
  struct Setting {
    const char* isa;
    const char* engine;
    moegrad_status last;
  } settings[] = {{"avx1024", nullptr, MOEGRAD_STATUS_INVALID_ARGUMENT},
                  {nullptr, "fast", MOEGRAD_STATUS_INVALID_ARGUMENT},
                  {"scalar", "rowvec", MOEGRAD_STATUS_SUCCESS}};
  for (const Setting& setting : settings) {
    SCOPED_TRACE(std::string("MOEGRAD_ISA=") + (setting.isa ? setting.isa : "(unset)") +
                 " MOEGRAD_ENGINE=" + (setting.engine ? setting.engine : "(unset)"));
    const ScopedEnv isa("MOEGRAD_ISA", setting.isa), engine("MOEGRAD_ENGINE", setting.engine);
    moegrad_status st = MOEGRAD_STATUS_OUT_OF_MEMORY;
    for (long n = 0; n < 1000 && st == MOEGRAD_STATUS_OUT_OF_MEMORY; ++n) {
      moegrad_context* ctx = nullptr;
      g_fail_after = n;
      try {
        st = moegrad_context_create(&ctx);
      } catch (const std::exception& e) {
        g_fail_after = -1;
        ADD_FAILURE() << "allocation " << n << " failed: " << e.what() << " left moegrad_context_create";
        break;
      }
      g_fail_after = -1;
      if (st == MOEGRAD_STATUS_OUT_OF_MEMORY) {
        EXPECT_EQ(ctx, nullptr) << n;
      }
      moegrad_context_destroy(ctx);
    }
    EXPECT_EQ(st, setting.last) << moegrad_last_error_message();
  }
}

// A context whose new pool cannot be built, at any point of building it
// (the pool object, its thread list, the n-th thread), keeps its old pool
// and thread count, joins the threads it did start, and still runs.
TEST(OutOfMemory, APoolThatCannotStartLeavesTheContextAsItWas) {
  moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 2);
  Problem p(medium(1, kF32));
  for (long succeed : {0L, 1L, 2L, 3L, 5L, 8L}) {
    SCOPED_TRACE("allocations that succeed first: " + std::to_string(succeed));
    g_fail_after = succeed;
    const moegrad_status st = moegrad_context_set_num_threads(ctx.get(), 16);
    g_fail_after = -1;
    EXPECT_EQ(st, MOEGRAD_STATUS_OUT_OF_MEMORY);
    EXPECT_NE(std::string(moegrad_last_error_message()).find("16 threads"), std::string::npos)
        << moegrad_last_error_message();
    EXPECT_EQ(ctx.num_threads(), 2);
    p.grad_x.fill_words(0x7FC0DEADu);
    ASSERT_EQ(moegrad_grad_x_run(p.args_ptr(), ctx.get()), MOEGRAD_STATUS_SUCCESS) << moegrad_last_error_message();
    EXPECT_EQ(compare_bits(read_grad_x(p.grad_x.dl()), reference_contract(p.args()), p.spec.K), "");
  }
}

}  // namespace
}  // namespace mgh
