// The CLI's parallel_for (random inputs, the float64 check): every index
// once, with helper threads and where the OS refuses them (a pids or
// RLIMIT_NPROC limit), when the caller runs the chunks no thread took.
// Before, a refused thread escaped as std::system_error and `moegrad run`
// died with "internal error".
//
// Its own binary: it interposes pthread_create (tests/support/refused_threads.h).
#include "parallel_for.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "runtime/usable_cpus.h"
#include "support/refused_threads.h"

namespace moegrad::cli {
namespace {

// How often parallel_for visited each index of [0, count), and on how many
// calls the visiting thread was not the caller.
struct Visits {
  explicit Visits(uint64_t count) : count(count), times(new std::atomic<int>[count]) {
    for (uint64_t i = 0; i < count; ++i) times[i] = 0;
  }
  void run() {
    const std::thread::id caller = std::this_thread::get_id();
    parallel_for(count, [&](uint64_t begin, uint64_t end) {
      if (std::this_thread::get_id() != caller) ++off_caller;
      for (uint64_t i = begin; i < end; ++i) ++times[i];
    });
  }
  bool each_once() const {
    for (uint64_t i = 0; i < count; ++i)
      if (times[i] != 1) return false;
    return true;
  }
  uint64_t count;
  std::unique_ptr<std::atomic<int>[]> times;
  std::atomic<int> off_caller{0};
};

TEST(ParallelFor, VisitsEveryIndexOnce) {
  for (uint64_t count : {0, 1, 2, 3, 1000}) {
    Visits v(count);
    v.run();
    EXPECT_TRUE(v.each_once()) << count;
  }
}

TEST(ParallelFor, RunsTheChunksOfRefusedThreadsOnTheCaller) {
#ifdef REFUSED_THREADS_UNAVAILABLE
  GTEST_SKIP() << "this sanitizer's own pthread_create cannot be interposed";
#endif
  if (runtime::usable_cpus() < 2) GTEST_SKIP() << "one usable CPU: parallel_for starts no thread to refuse";
  Visits v(1000);
  refused_threads::refused = 0;
  refused_threads::refuse = true;
  v.run();
  refused_threads::refuse = false;
  EXPECT_GT(refused_threads::refused.load(), 0) << "no thread was asked for";
  EXPECT_TRUE(v.each_once());
  EXPECT_EQ(v.off_caller.load(), 0) << "a chunk ran on a thread that was refused";
}

}  // namespace
}  // namespace moegrad::cli
