// Concurrency (run under ThreadSanitizer by scripts/test_sanitizers.sh):
//  * many executors at once from several threads over shared read-only
//    inputs, each thread with its own context, or all on one context (runs
//    are then serialised by the pool), or on the default context;
//  * executors planned on one thread and run on others;
//  * one executor raced by several threads runs exactly once;
//  * the last-error message is per thread;
//  * settings changed on a context while other threads run on it;
//  * contexts created, resized and destroyed concurrently.
// Every result is checked bit for bit against SPEC §5's order.
#include <moegrad/moegrad.h>

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "problem.h"
#include "reference.h"
#include "runner.h"

namespace mgh {
namespace {

constexpr int kThreads = 6;
constexpr int kRounds = 3;

// Read-only inputs shared by every thread, with their expected results.
struct Shared {
  std::vector<std::unique_ptr<Problem>> problems;
  std::vector<std::vector<float>> want;
};

const Shared& shared() {
  static const Shared* s = [] {
    auto* out = new Shared;
    ProblemSpec a;
    a.batch = 24, a.top_k = 2, a.G = 4, a.N = 33, a.K = 45, a.values = Values::kUniform, a.seed = 101;
    ProblemSpec b = a;
    b.dtype = kBF16, b.row_idx_type = 1, b.w_layout = Layout::kSwapInner, b.gx_layout = Layout::kPadded, b.seed = 102;
    ProblemSpec c = a;
    c.dtype = kF16, c.gy_layout = Layout::kNegative, c.group_list_type = 1, c.keep_percent = 50, c.seed = 103;
    for (const ProblemSpec& spec : {a, b, c}) {
      out->problems.push_back(std::make_unique<Problem>(spec));
      out->want.push_back(reference_contract(out->problems.back()->args()));
    }
    return out;
  }();
  return *s;
}

// A private grad_x for one thread: args over the shared inputs.
struct Output {
  Tensor grad_x;
  moegrad_grad_x_args args;
  explicit Output(const Problem& p) {
    grad_x = Tensor(kF32, p.grad_x.shape(), p.grad_x.strides(), false);
    grad_x.fill_words(0x7FC0DEADu);
    args = p.args();
    args.grad_x = &grad_x.dl();
  }
};

// Runs every shared problem `rounds` times with plan/run contexts from
// `ctx_for(thread, round)`; returns "" or the first failure.
template <typename CtxFor>
std::string worker(int thread, int rounds, CtxFor ctx_for) {
  const Shared& s = shared();
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < s.problems.size(); ++i) {
      Output out(*s.problems[i]);
      RunOptions opt;
      opt.plan_ctx = opt.run_ctx = ctx_for(thread, round);
      opt.misalign = static_cast<size_t>(thread * 7 + round);
      const RunResult r = run_grad_x(&out.args, opt);
      if (!r.ok()) return "thread " + std::to_string(thread) + ": " + r.describe();
      const std::string d = compare_bits(read_grad_x(out.grad_x.dl()), s.want[i], s.problems[i]->spec.K);
      if (!d.empty()) return "thread " + std::to_string(thread) + " problem " + std::to_string(i) + ": " + d;
    }
  }
  return "";
}

template <typename Body>
void run_threads(int n, Body body) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back([&, t] { errors[static_cast<size_t>(t)] = body(t); });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(Concurrency, ManyExecutorsEachThreadItsOwnContext) {
  shared();
  const std::vector<moegrad_isa> isas = available_isas();
  run_threads(kThreads, [&](int t) {
    moegrad::Context ctx = make_context(isas[static_cast<size_t>(t) % isas.size()], 1 + t % 3);
    return worker(t, kRounds, [&](int, int) { return ctx.get(); });
  });
}

// SPEC/header: "A context may be used from several threads at once: runs on
// one context are serialised (they share its pool)."
TEST(Concurrency, OneContextSharedByAllThreads) {
  shared();
  moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 3);
  run_threads(kThreads, [&](int t) { return worker(t, kRounds, [&](int, int) { return ctx.get(); }); });
}

TEST(Concurrency, DefaultContextFromAllThreads) {
  shared();
  run_threads(kThreads, [&](int t) {
    return worker(t, kRounds, [](int, int) { return static_cast<const moegrad_context*>(nullptr); });
  });
}

// Planned on this thread, run concurrently on others, on one shared context
// and on contexts with fewer threads than planned.
TEST(Concurrency, ExecutorsPlannedHereRunElsewhere) {
  const Shared& s = shared();
  moegrad::Context plan_ctx = make_context(MOEGRAD_ISA_AUTO, 4);
  moegrad::Context small_ctx = make_context(MOEGRAD_ISA_AUTO, 1);
  std::vector<std::unique_ptr<Output>> outs;
  std::vector<ExecutorPtr> exs;
  std::vector<size_t> bytes;
  for (int t = 0; t < kThreads; ++t) {
    const size_t i = static_cast<size_t>(t) % s.problems.size();
    outs.push_back(std::make_unique<Output>(*s.problems[i]));
    size_t b = 0;
    moegrad_executor* raw = nullptr;
    ASSERT_EQ(moegrad_grad_x_get_workspace_size(&outs.back()->args, plan_ctx.get(), &b, &raw), MOEGRAD_STATUS_SUCCESS);
    exs.push_back(own(raw));
    bytes.push_back(b);
  }
  run_threads(kThreads, [&](int t) -> std::string {
    const size_t ti = static_cast<size_t>(t);
    Workspace ws = make_workspace(bytes[ti], static_cast<size_t>(t), {0xEE});
    const moegrad_context* run_ctx = t % 2 ? small_ctx.get() : plan_ctx.get();
    if (moegrad_grad_x(ws.ptr, ws.bytes, exs[ti].get(), run_ctx) != MOEGRAD_STATUS_SUCCESS)
      return std::string("run failed: ") + moegrad_last_error_message();
    const size_t i = ti % s.problems.size();
    return compare_bits(read_grad_x(outs[ti]->grad_x.dl()), s.want[i], s.problems[i]->spec.K);
  });
}

// An executor is single-use "even across threads": of several racing runs
// exactly one succeeds, the rest get EXECUTOR_USED, and grad_x is right.
TEST(Concurrency, RacedExecutorRunsExactlyOnce) {
  const Shared& s = shared();
  moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 2);
  for (int attempt = 0; attempt < 4; ++attempt) {
    Output out(*s.problems[0]);
    size_t bytes = 0;
    moegrad_executor* raw = nullptr;
    ASSERT_EQ(moegrad_grad_x_get_workspace_size(&out.args, ctx.get(), &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
    ExecutorPtr ex = own(raw);
    std::atomic<int> ok{0}, used{0}, other{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        Workspace ws = make_workspace(bytes, static_cast<size_t>(t), {0x11});
        while (!go.load()) std::this_thread::yield();
        const moegrad_status st = moegrad_grad_x(ws.ptr, ws.bytes, ex.get(), ctx.get());
        (st == MOEGRAD_STATUS_SUCCESS ? ok : st == MOEGRAD_STATUS_EXECUTOR_USED ? used : other)++;
      });
    }
    go = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok.load(), 1);
    EXPECT_EQ(used.load(), kThreads - 1);
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(compare_bits(read_grad_x(out.grad_x.dl()), s.want[0], s.problems[0]->spec.K), "");
  }
}

// moegrad_last_error_message() is per thread: concurrent failures with
// different values each see their own message.
TEST(Concurrency, LastErrorMessageIsPerThread) {
  const Shared& s = shared();
  run_threads(kThreads, [&](int t) -> std::string {
    for (int round = 0; round < 50; ++round) {
      moegrad_grad_x_args a = s.problems[0]->args();
      a.batch = -(1000 + t);  // "batch=-100t must be > 0"
      size_t bytes = 0;
      moegrad_executor* raw = nullptr;
      if (moegrad_grad_x_get_workspace_size(&a, nullptr, &bytes, &raw) != MOEGRAD_STATUS_BAD_BATCH)
        return "expected BAD_BATCH";
      const std::string msg = moegrad_last_error_message();
      if (msg.find(std::to_string(-(1000 + t))) == std::string::npos) return "foreign message: " + msg;
    }
    return "";
  });
}

// The header: "A context may be used from several threads at once". Here one
// thread keeps changing the context's settings (thread count, ISA) while
// others plan and run on it: every run must still give the contract bits,
// and - under TSan - without a data race on the settings.
TEST(Concurrency, SettingsChangedWhileOtherThreadsRun) {
  moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 2);
  std::atomic<bool> done{false};
  std::thread setter([&] {
    const std::vector<moegrad_isa> isas = available_isas();
    for (int i = 0; !done.load(); ++i) {
      moegrad_context_set_num_threads(ctx.get(), 1 + i % 4);
      moegrad_context_set_isa(ctx.get(), isas[static_cast<size_t>(i) % isas.size()]);
      std::this_thread::yield();
    }
  });
  run_threads(3, [&](int t) { return worker(t, 2, [&](int, int) { return ctx.get(); }); });
  done = true;
  setter.join();
}

// Contexts (each with its own pool) created, resized and destroyed from many
// threads at once, with runs in between.
TEST(Concurrency, ContextLifecycleFromManyThreads) {
  const Shared& s = shared();
  run_threads(kThreads, [&](int t) -> std::string {
    for (int round = 0; round < 4; ++round) {
      moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 1 + (t + round) % 4);
      if (moegrad_context_set_num_threads(ctx.get(), 1 + (t + round + 1) % 3) != MOEGRAD_STATUS_SUCCESS)
        return std::string("set_num_threads: ") + moegrad_last_error_message();
      Output out(*s.problems[1]);
      RunOptions opt;
      opt.plan_ctx = opt.run_ctx = ctx.get();
      const RunResult r = run_grad_x(&out.args, opt);
      if (!r.ok()) return r.describe();
      const std::string d = compare_bits(read_grad_x(out.grad_x.dl()), s.want[1], s.problems[1]->spec.K);
      if (!d.empty()) return d;
    }
    return "";
  });
}

}  // namespace
}  // namespace mgh
