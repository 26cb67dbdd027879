// A fork() while another thread is in the middle of the library's one-time
// initialisation (its first call: the default context, CPU detection). The
// child must not inherit that initialisation as "in progress" forever: with
// function-local statics it did, and its first call waited on a guard that
// no thread of the child would ever release (found by experiment: 3 of
// 1500 forks at random moments hung; here, every one).
//
// Its own binary: it needs the library's first use in the process, and it
// interposes sysconf() to hold the initialising thread at a known point, in
// CPU detection (runtime/cpu_features.cpp asks sysconf for the L1D size),
// while the main thread forks.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "fork_case.h"

namespace {

using SysconfFn = long (*)(int);
std::atomic<SysconfFn> g_real_sysconf{nullptr};
std::atomic<bool> g_armed{false};    // the next L1D query holds its thread
std::atomic<bool> g_holding{false};  // a thread is held there
std::atomic<bool> g_release{false};

}  // namespace

// Interposes the C library's sysconf for the whole process (the library's
// calls included); forwards every call.
extern "C" long sysconf(int name) {
  SysconfFn real = g_real_sysconf.load();
  if (real == nullptr) {
    real = reinterpret_cast<SysconfFn>(dlsym(RTLD_NEXT, "sysconf"));
    g_real_sysconf.store(real);
  }
  if (name == _SC_LEVEL1_DCACHE_SIZE && g_armed.exchange(false)) {
    g_holding = true;
    while (!g_release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return real(name);
}

namespace mgh {
namespace {

TEST(ForkFirstUse, ChildForkedWhileAnotherThreadInitialisesTheLibrary) {
  const ForkCase c;  // float64 reference: no library call yet
  g_armed = true;
  bool first_ok = false;
  std::thread first([&] { first_ok = c.run_matches(nullptr); });  // the first call: builds the default context
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!g_holding.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool held = g_holding.load();
  pid_t pid = -1;
  if (held) {
    pid = fork();
    if (pid == 0) {
      alarm(30);  // a hang ends the child with SIGALRM
      _exit(c.run_matches(nullptr) ? 0 : 1);
    }
  }
  g_armed = false;
  g_release = true;
  first.join();
  ASSERT_TRUE(held) << "the first call never asked sysconf for the L1D size, so this test could not hold it "
                       "inside the library's initialisation (did something initialise it earlier?)";
  ASSERT_GE(pid, 0) << "fork failed";
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_FALSE(WIFSIGNALED(status)) << "the child died of signal " << WTERMSIG(status)
                                    << (WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's run failed or differed from the reference";
  EXPECT_TRUE(first_ok) << "the parent's first run failed or differed from the reference";
}

}  // namespace
}  // namespace mgh
