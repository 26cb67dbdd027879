// A small persistent pool. We use our own instead of OpenMP because
// (1) ThreadSanitizer understands std::thread/condition_variable but not
// libgomp's barriers, (2) a context owns its threads, so two contexts never
// fight over one global runtime, and (3) the work split is ours anyway: the
// determinism contract never depends on which thread does which work item.
#pragma once

#include <sys/types.h>

#include <atomic>
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
  // A pool no larger than the CPUs it may use (usable_cpus(), or fits_cpus
  // given) polls for up to kPollMicros before it sleeps, both a worker
  // waiting for the next job and the caller waiting for the workers, and a
  // worker that starts a job on the caller's CPU moves off it (the .cpp
  // says why). A larger one only sleeps: a poll would take CPU time from
  // threads with work.
  explicit ThreadPool(int num_threads);
  ThreadPool(int num_threads, bool fits_cpus);
  static constexpr int kPollMicros = 100;
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

  // Calls job.fn(job.ctx, 0) on the caller and job.fn(job.ctx, w), each on
  // a thread of its own, for each w in [1, workers) whose thread starts it
  // before the caller's call has returned; returns when every call made has
  // returned. workers is clamped to [1, size()]. Concurrent calls are
  // serialised. So a job must hand out its work as it goes
  // (parallel_items): a worker that starts late finds nothing left, and one
  // that does not start leaves nothing undone. Why a late worker is not
  // waited for: it may be on its way to another CPU (the .cpp), and the
  // caller, having done the work, would only wait.
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
  template <typename Ready>
  void poll_until(Ready ready) const;
  bool enter(uint64_t generation);  // a worker's entry into that job, if still open

  std::mutex run_mutex_;  // one run at a time
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  Job job_{};
  // Written under mutex_; atomic where a thread reads them without it.
  int active_ = 0;                       // workers taking part in the current job
  int caller_cpu_ = -1;                  // the CPU the caller started it on (-1: unknown)
  std::atomic<uint64_t> generation_{0};  // bumped per job
  std::atomic<bool> stop_{false};
  // The current job's entry: its generation's low 32 bits << 32, kClosed
  // once the caller's share has returned (no worker may enter after that),
  // and in the low bits the workers that entered it. A worker enters by a
  // compare-and-swap that fails once the job is closed or replaced.
  static constexpr uint64_t kClosed = uint64_t{1} << 31;
  static constexpr uint64_t kEnteredMask = kClosed - 1;
  static constexpr uint64_t open_entry(uint64_t generation) {
    return static_cast<uint64_t>(static_cast<uint32_t>(generation)) << 32;
  }
  std::atomic<uint64_t> entry_{0};
  std::atomic<int> finished_{0};  // workers that entered the job and returned
  bool fits_cpus_ = false;
  std::vector<std::thread> threads_;
  // The process that started the workers: its fork generation (a process
  // id may be reused by a descendant), and its id (should forks go
  // uncounted).
  uint64_t owner_generation_;
  pid_t owner_pid_;
};

}  // namespace moegrad::runtime
