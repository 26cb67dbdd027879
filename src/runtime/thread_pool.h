// A small persistent pool. We use our own instead of OpenMP because
// (1) ThreadSanitizer understands std::thread/condition_variable but not
// libgomp's barriers, (2) a context owns its threads, so two contexts never
// fight over one global runtime, and (3) the work split is ours anyway: the
// determinism contract never depends on which thread does which work item.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace moegrad::runtime {

class ThreadPool {
 public:
  // num_threads >= 1 counts the calling thread: num_threads - 1 are spawned.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()) + 1; }

  // True in a process forked after this pool started: fork() copies only the
  // calling thread, so the workers exist in the parent alone. Such a pool
  // can neither run (it would wait for them forever) nor be destroyed (there
  // is nothing to join, and its condition variables count waiters that live
  // in the parent): its owner leaves it allocated and starts a new one.
  bool forked() const;

  // A borrowed callable (no allocation, unlike std::function): fn(ctx, w).
  // noexcept: an exception leaving the caller's share would unwind its
  // stack while the workers still use what it holds.
  struct Job {
    void (*fn)(void* ctx, int worker) noexcept;
    void* ctx;
  };

  // Calls job.fn(job.ctx, w) for w in [0, workers) concurrently (w = 0 on the
  // caller) and returns when all have returned. workers is clamped to
  // [1, size()]. Concurrent calls are serialised.
  void run(int workers, Job job);

  // Same, for any callable f(int worker) declared noexcept; f is borrowed,
  // not copied.
  template <typename F>
  void run(int workers, F& f) {
    static_assert(std::is_nothrow_invocable_v<F&, int>, "a pool job must be noexcept");
    run(workers, Job{[](void* ctx, int w) noexcept { (*static_cast<F*>(ctx))(w); }, &f});
  }

 private:
  void worker_loop(int index);
  void stop_and_join();

  std::mutex run_mutex_;  // one run at a time
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  Job job_{};
  int active_ = 0;          // workers taking part in the current job
  int pending_ = 0;         // background workers yet to finish it
  uint64_t generation_ = 0; // bumped per job
  bool stop_ = false;
  std::vector<std::thread> threads_;
  // The process that started the workers: its fork generation (a process
  // id may be reused by a descendant), and its id (should forks go
  // uncounted).
  uint64_t owner_generation_;
  pid_t owner_pid_;
};

}  // namespace moegrad::runtime
