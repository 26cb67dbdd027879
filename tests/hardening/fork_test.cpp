// fork() after multithreaded runs (Python's multiprocessing with the fork
// start method, PyTorch DataLoader workers): the child inherits the contexts
// but not their worker threads. It must still compute, with the same bits,
// on those contexts and on the default one, resize and destroy them, and
// the parent must be unaffected. Before the fix the child waited forever
// for the parent's workers; an alarm turns a hang into a failure here. And a
// fork while another thread holds a context's pool lock (starting a pool)
// must not hand the child that lock held.
#include <moegrad/moegrad.h>
#include <moegrad/moegrad_layer.h>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fork_case.h"
#include "runner.h"

namespace mgh {
namespace {

// Exit codes of the child: which step failed.
enum ChildExit : int { kOk = 0, kSharedContext = 10, kDefaultContext, kResized, kNewContext, kLayerOp };

// A layer operator (its own executor path): grouped matmul of 2 experts
// over 3 rows, against float64.
bool layer_op_matches(const moegrad_context* ctx) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, w = {1, 0, 0, 1, 2, 0, 0, 2}, y(6, -1.0f);
  std::vector<int64_t> counts = {2, 1};
  int64_t xs[2] = {3, 2}, ws[3] = {2, 2, 2}, gs[1] = {2}, ys[2] = {3, 2};
  DLTensor tx{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, xs, nullptr, 0};
  DLTensor tw{w.data(), {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, ws, nullptr, 0};
  DLTensor tg{counts.data(), {kDLCPU, 0}, 1, {kDLInt, 64, 1}, gs, nullptr, 0};
  DLTensor ty{y.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ys, nullptr, 0};
  moegrad_grouped_matmul_args a{&tx, &tw, &tg, &ty, MOEGRAD_GROUP_LIST_COUNT};
  if (moegrad_grouped_matmul_run(&a, ctx) != MOEGRAD_STATUS_SUCCESS) return false;
  // Rows 0-1 through the identity, row 2 through 2*I.
  return y == std::vector<float>{1, 2, 3, 4, 10, 12};
}

int child(const ForkCase& c, moegrad::Context& shared, moegrad::Context& other) {
  alarm(60);  // a hang ends the child with SIGALRM instead of stalling the suite
  if (!c.run_matches(shared.get())) return kSharedContext;
  if (!c.run_matches(nullptr)) return kDefaultContext;
  if (!layer_op_matches(shared.get())) return kLayerOp;
  other.set_num_threads(2);  // resizing an inherited pool
  if (!c.run_matches(other.get())) return kResized;
  moegrad::Context fresh = make_context(MOEGRAD_ISA_AUTO, 3);
  if (!c.run_matches(fresh.get())) return kNewContext;
  return kOk;  // the contexts are destroyed on the way out: that must not hang either
}

TEST(Fork, ChildComputesOnInheritedContexts) {
  const ForkCase c;
  moegrad::Context shared = make_context(MOEGRAD_ISA_AUTO, 3);
  moegrad::Context other = make_context(MOEGRAD_ISA_AUTO, 4);
  // Every pool has started its workers and run before the fork.
  ASSERT_TRUE(c.run_matches(shared.get()));
  ASSERT_TRUE(c.run_matches(other.get()));
  ASSERT_TRUE(c.run_matches(nullptr));
  ASSERT_TRUE(layer_op_matches(shared.get()));

  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {
    int code = 0;
    {
      moegrad::Context moved_shared = std::move(shared), moved_other = std::move(other);
      code = child(c, moved_shared, moved_other);
    }
    _exit(code);  // no gtest teardown in the child
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_FALSE(WIFSIGNALED(status)) << "the child died of signal " << WTERMSIG(status)
                                    << (WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kOk) << "the child failed at step " << WEXITSTATUS(status);

  // The parent's pools are untouched.
  EXPECT_TRUE(c.run_matches(shared.get()));
  EXPECT_TRUE(c.run_matches(other.get()));
  EXPECT_TRUE(c.run_matches(nullptr));
}

// Another thread resizes the context's pool without pause, so it holds the
// pool lock (starting and joining workers) most of the time; each child
// forked meanwhile must still compute on that context. Before the lock was
// fork-safe, children hung in their first run.
TEST(Fork, ChildForkedWhileAnotherThreadStartsAPool) {
  const ForkCase c;
  moegrad::Context ctx = make_context(MOEGRAD_ISA_AUTO, 2);
  ASSERT_TRUE(c.run_matches(ctx.get()));
  std::atomic<bool> stop{false};
  std::atomic<int> resizes{0};
  std::thread resizer([&] {
    for (int32_t n = 3; !stop.load(); n = 5 - n) {  // 3, 2, 3, ...
      ctx.set_num_threads(n);
      resizes.fetch_add(1);
    }
  });
  constexpr int kForks = 16;
  int waited = 0, hung = 0, failed = 0;
  for (int i = 0; i < kForks; ++i) {
    while (resizes.load() < 2 * (i + 1)) std::this_thread::yield();  // forks land mid-resize
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(30);
      _exit(c.run_matches(ctx.get()) ? kOk : kSharedContext);
    }
    if (pid < 0) break;  // counted below: fewer children than kForks fails
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) break;
    ++waited;
    if (WIFSIGNALED(status)) {
      ++hung;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != kOk) {
      ++failed;
    }
  }
  stop = true;
  resizer.join();
  EXPECT_EQ(waited, kForks) << "children forked and waited for";
  EXPECT_EQ(hung, 0) << "children that hung (or died) of " << kForks;
  EXPECT_EQ(failed, 0) << "children whose run failed or differed, of " << kForks;
  EXPECT_TRUE(c.run_matches(ctx.get()));
}

}  // namespace
}  // namespace mgh
