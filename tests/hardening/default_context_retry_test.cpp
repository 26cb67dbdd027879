// The default context (what a NULL context means) is built once per
// process. Threads that cannot be started at that moment - a container at
// its pids limit, for a moment - must fail only the calls made meanwhile,
// not every later one.
//
// Its own binary: it needs the library's first use in the process, and it
// interposes pthread_create to refuse threads (EAGAIN, as the kernel does at
// a pids or RLIMIT_NPROC limit) while armed.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "fork_case.h"

// Where a sanitizer's runtime is linked statically (clang's), its
// pthread_create interceptor is a weak alias that a definition here would
// replace, hiding every thread from it (ThreadSanitizer would crash): there
// the test does not interpose and skips.
#if defined(__SANITIZE_THREAD__)
#define MGH_CANNOT_INTERPOSE 1
#elif defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MGH_CANNOT_INTERPOSE 1
#endif
#endif

namespace {

std::atomic<bool> g_refuse{false};
std::atomic<int> g_refused{0};

}  // namespace

#ifndef MGH_CANNOT_INTERPOSE
namespace {

using PthreadCreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
std::atomic<PthreadCreateFn> g_real_pthread_create{nullptr};

}  // namespace

// Interposes the C library's pthread_create for the whole process (the
// library's std::threads included); forwards every call it does not refuse.
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  PthreadCreateFn real = g_real_pthread_create.load();
  if (real == nullptr) {
    real = reinterpret_cast<PthreadCreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
    g_real_pthread_create.store(real);
  }
  if (g_refuse.load()) {
    g_refused.fetch_add(1);
    return EAGAIN;
  }
  return real(thread, attr, start, arg);
}
#endif

namespace mgh {
namespace {

TEST(DefaultContext, AFirstUseThatCannotStartThreadsIsRetriedByTheNextCall) {
#ifdef MGH_CANNOT_INTERPOSE
  GTEST_SKIP() << "this sanitizer's own pthread_create cannot be interposed";
#endif
  ASSERT_EQ(setenv("MOEGRAD_NUM_THREADS", "3", 1), 0);  // two threads beside the caller's
  const ForkCase c;  // float64 reference: no library call yet
  Tensor grad_x(kF32, c.problem.grad_x.shape(), c.problem.grad_x.strides(), false);
  grad_x.fill_words(0x7FC0DEADu);
  const std::vector<std::byte> before = grad_x.snapshot();
  moegrad_grad_x_args args = c.problem.args();
  args.grad_x = &grad_x.dl();

  g_refuse = true;
  const moegrad_status refused = moegrad_grad_x_run(&args, nullptr);  // the first use: builds the default context
  const std::string message = moegrad_last_error_message();
  g_refuse = false;
  ASSERT_GT(g_refused.load(), 0) << "the first call started no thread, so nothing was refused (status "
                                 << refused << ": " << message << ")";
  EXPECT_EQ(refused, MOEGRAD_STATUS_OUT_OF_MEMORY) << message;
  EXPECT_NE(message.find("3 threads"), std::string::npos) << message;
  EXPECT_TRUE(grad_x.snapshot() == before) << "grad_x was written by the refused call";

  EXPECT_TRUE(c.run_matches(nullptr)) << "with threads available again, the default context still fails: "
                                      << moegrad_last_error_message();
}

}  // namespace
}  // namespace mgh
