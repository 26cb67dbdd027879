// The default context (what a NULL context means) is built once per
// process. Threads that cannot be started at that moment - a container at
// its pids limit, for a moment - must fail only the calls made meanwhile,
// not every later one.
//
// Its own binary: it needs the library's first use in the process, and it
// interposes pthread_create to refuse threads (tests/support/refused_threads.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "fork_case.h"
#include "support/refused_threads.h"

namespace mgh {
namespace {

using refused_threads::refuse;
using refused_threads::refused;

// c's problem run on ctx (NULL: the default context) while threads are
// refused, into a NaN-filled grad_x: its status and message, and whether
// grad_x is as it was.
struct RefusedRun {
  moegrad_status status;
  std::string message;
  bool grad_x_untouched;
};

RefusedRun run_refusing_threads(const ForkCase& c, const moegrad_context* ctx) {
  Tensor grad_x(kF32, c.problem.grad_x.shape(), c.problem.grad_x.strides(), false);
  grad_x.fill_words(0x7FC0DEADu);
  const std::vector<std::byte> before = grad_x.snapshot();
  moegrad_grad_x_args args = c.problem.args();
  args.grad_x = &grad_x.dl();
  refuse = true;
  const moegrad_status status = moegrad_grad_x_run(&args, ctx);
  const std::string message = moegrad_last_error_message();
  refuse = false;
  return {status, message, grad_x.snapshot() == before};
}

TEST(DefaultContext, AFirstUseThatCannotStartThreadsIsRetriedByTheNextCall) {
#ifdef REFUSED_THREADS_UNAVAILABLE
  GTEST_SKIP() << "this sanitizer's own pthread_create cannot be interposed";
#endif
  ASSERT_EQ(setenv("MOEGRAD_NUM_THREADS", "3", 1), 0);  // two threads beside the caller's
  const ForkCase c;  // float64 reference: no library call yet
  const RefusedRun r = run_refusing_threads(c, nullptr);  // the first use: builds the default context
  ASSERT_GT(refused.load(), 0) << "the first call started no thread, so nothing was refused (status " << r.status
                               << ": " << r.message << ")";
  EXPECT_EQ(r.status, MOEGRAD_STATUS_OUT_OF_MEMORY) << r.message;
  EXPECT_NE(r.message.find("3 threads"), std::string::npos) << r.message;
  EXPECT_TRUE(r.grad_x_untouched) << "grad_x was written by the refused call";

  EXPECT_TRUE(c.run_matches(nullptr)) << "with threads available again, the default context still fails: "
                                      << moegrad_last_error_message();
}

// A created context starts its threads at its first run, so a thread count
// set before running is the only one started: where the OS refuses threads,
// one thread (which needs none beside the caller's) still runs, and a run
// that needs more fails with the count it asked for and writes nothing.
// Before, moegrad_context_create started MOEGRAD_NUM_THREADS's three at
// once and failed (as the CLI's --threads 1 and Python's num_threads=1 did,
// which create a context and then set the count).
TEST(CreatedContext, StartsNoThreadBeforeItRuns) {
#ifdef REFUSED_THREADS_UNAVAILABLE
  GTEST_SKIP() << "this sanitizer's own pthread_create cannot be interposed";
#endif
  ASSERT_EQ(setenv("MOEGRAD_NUM_THREADS", "3", 1), 0);
  const ForkCase c;
  refused = 0;
  refuse = true;
  moegrad_context* raw = nullptr;
  const moegrad_status created = moegrad_context_create(&raw);
  const std::string create_message = moegrad_last_error_message();
  std::unique_ptr<moegrad_context, decltype(&moegrad_context_destroy)> ctx(raw, moegrad_context_destroy);
  const moegrad_status one = created == MOEGRAD_STATUS_SUCCESS ? moegrad_context_set_num_threads(raw, 1) : created;
  const bool one_ran = one == MOEGRAD_STATUS_SUCCESS && c.run_matches(raw);
  const std::string one_message = moegrad_last_error_message();

  const moegrad_status two = created == MOEGRAD_STATUS_SUCCESS ? moegrad_context_set_num_threads(raw, 2) : created;
  const std::string two_message = moegrad_last_error_message();
  refuse = false;
  ASSERT_EQ(created, MOEGRAD_STATUS_SUCCESS) << create_message;
  EXPECT_EQ(one, MOEGRAD_STATUS_SUCCESS) << one_message;
  EXPECT_TRUE(one_ran) << one_message;
  EXPECT_EQ(two, MOEGRAD_STATUS_OUT_OF_MEMORY) << two_message;
  EXPECT_NE(two_message.find("2 threads"), std::string::npos) << two_message;
  EXPECT_EQ(refused.load(), 1) << "only the two-thread pool asks for a thread";
  int32_t threads = 0;
  ASSERT_EQ(moegrad_context_get_num_threads(raw, &threads), MOEGRAD_STATUS_SUCCESS);
  EXPECT_EQ(threads, 1) << "a refused count leaves the context as it was";
  EXPECT_TRUE(c.run_matches(raw)) << moegrad_last_error_message();

  // A new context's first run starts its default three, or fails naming them.
  moegrad_context* fresh_raw = nullptr;
  ASSERT_EQ(moegrad_context_create(&fresh_raw), MOEGRAD_STATUS_SUCCESS);
  std::unique_ptr<moegrad_context, decltype(&moegrad_context_destroy)> fresh(fresh_raw, moegrad_context_destroy);
  const RefusedRun r = run_refusing_threads(c, fresh_raw);
  EXPECT_EQ(r.status, MOEGRAD_STATUS_OUT_OF_MEMORY) << r.message;
  EXPECT_NE(r.message.find("3 threads"), std::string::npos) << r.message;
  EXPECT_TRUE(r.grad_x_untouched) << "grad_x was written by the refused run";
  EXPECT_TRUE(c.run_matches(fresh_raw)) << moegrad_last_error_message();
}

}  // namespace
}  // namespace mgh
