// runtime::ThreadPool on its own: a run on w workers calls indices 0..w-1
// once each (0 on the calling thread, the others each on a thread of its
// own, all at once), for any sequence of runs, including runs on fewer
// workers than the pool has, which must not call the job on the others.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "runtime/thread_pool.h"

namespace {

using moegrad::runtime::ThreadPool;
constexpr int kMaxSize = 5;

TEST(ThreadPool, EachRunCallsExactlyItsWorkersOnce) {
  for (int size = 1; size <= kMaxSize; ++size) {
    ThreadPool pool(size);
    ASSERT_EQ(pool.size(), size);
    std::mt19937 rng(static_cast<unsigned>(size));
    std::uniform_int_distribution<int> pick(0, size + 1);  // 0 and size + 1 are clamped
    for (int run = 0; run < 400; ++run) {
      const int workers = pick(rng), expected = std::clamp(workers, 1, size);
      std::array<std::atomic<int>, kMaxSize + 2> calls{};
      std::thread::id worker0;
      auto job = [&](int w) noexcept {
        calls[static_cast<size_t>(w)].fetch_add(1);
        if (w == 0) worker0 = std::this_thread::get_id();
      };
      pool.run(workers, job);
      for (int w = 0; w < kMaxSize + 2; ++w)
        ASSERT_EQ(calls[static_cast<size_t>(w)].load(), w < expected ? 1 : 0)
            << "pool of " << size << ", run " << run << " on " << workers << " workers, index " << w;
      ASSERT_EQ(worker0, std::this_thread::get_id()) << "index 0 runs on the caller";
    }
  }
}

// Every worker of a run waits until all of them have arrived: this returns
// only if they run at the same time, each on its own thread. A worker that
// was never woken would leave the others waiting until the deadline.
TEST(ThreadPool, AllWorkersOfARunRunAtOnceOnThreadsOfTheirOwn) {
  ThreadPool pool(kMaxSize);
  for (const int workers : {kMaxSize, 2, 1, 3, kMaxSize, 2}) {
    std::atomic<int> arrived{0};
    std::atomic<bool> all_met{true};
    std::mutex m;
    std::set<std::thread::id> threads;
    auto job = [&](int) noexcept {
      {
        const std::lock_guard<std::mutex> lock(m);
        threads.insert(std::this_thread::get_id());
      }
      arrived.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (arrived.load() < workers) {
        if (std::chrono::steady_clock::now() > deadline) {
          all_met = false;
          return;
        }
        std::this_thread::yield();
      }
    };
    pool.run(workers, job);
    EXPECT_TRUE(all_met.load()) << workers << " workers did not all run at once";
    EXPECT_EQ(threads.size(), static_cast<size_t>(workers));
  }
}

}  // namespace
