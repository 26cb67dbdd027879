#include "runtime/thread_pool.h"

#include <unistd.h>

#include <algorithm>

#include "runtime/fork_generation.h"

namespace moegrad::runtime {

ThreadPool::ThreadPool(int num_threads) : owner_generation_(fork_generation()), owner_pid_(::getpid()) {
  const int spawn = std::max(num_threads, 1) - 1;
  threads_.reserve(static_cast<size_t>(spawn));
  try {
    for (int i = 0; i < spawn; ++i) threads_.emplace_back([this, i] { worker_loop(i + 1); });
  } catch (...) {
    // The process ran out of threads part-way: the ones started must be
    // joined, or destroying them would call std::terminate.
    stop_and_join();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop_and_join(); }

void ThreadPool::stop_and_join() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

bool ThreadPool::forked() const { return fork_generation() != owner_generation_ || ::getpid() != owner_pid_; }

void ThreadPool::run(int workers, Job job) {
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  workers = std::clamp(workers, 1, size());
  if (workers > 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = job;
    active_ = workers;
    pending_ = workers - 1;
    ++generation_;
  }
  if (workers > 1) start_cv_.notify_all();
  job.fn(job.ctx, 0);
  if (workers > 1) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    job_ = Job{};
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    Job job{};
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= active_) continue;
      job = job_;
    }
    job.fn(job.ctx, index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace moegrad::runtime
