#include "runtime/thread_pool.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "runtime/fork_generation.h"
#include "runtime/usable_cpus.h"

namespace moegrad::runtime {

// Why a pool that fits its CPUs polls, and steps off the caller's CPU.
//
// A woken thread runs where the kernel's wake-up placement puts it. A
// kernel that sees no cache shared between two CPUs (a VM whose CPUID
// leaves it out, as on the 2-vCPU Firecracker VMs we measure on) looks for
// an idle CPU only among the wakee's last CPU and the waker's. So a worker
// whose last CPU is the caller's is put beside the caller, and, as each of
// the two sleeps once its share is done, the tick's load balancer seldom
// sees both runnable and moves neither: a loop of 2-thread calls of 0.5 ms
// after 20 ms asleep ran at one thread's speed for 14 calls. Measured with
// `moegrad bench` while making this (2 threads against 1, f32, medians of
// 21 rounds, each timed after 10 ms of back-to-back calls): 512,2,8,512,512
// took 1.02x one thread's time with neither remedy below, 0.79-0.99x
// polling alone, 0.89x stepping off alone, 0.57x with both (0.71-0.72x in
// two runs of the final form in a slower hour, `--reps 7`).
//
// * Polling keeps a worker on its CPU between calls that follow each other
//   within kPollMicros (as OpenMP's spinning threads stay on theirs), and
//   saves the futex wake-up. It yields now and then, so a thread that
//   shares its CPU lets the other run. Bounded, so an idle pool sleeps.
// * Stepping off: a worker that starts a job on the CPU the caller started
//   it on narrows its affinity to the other CPUs it may use, which moves it
//   now, and restores it at once, which leaves it where it landed. The move
//   takes 0.1-0.2 ms on those VMs after an idle (the CPU it lands on was
//   halted), in which the caller works alone; it does not wait for a worker
//   that arrives after its own share is done (run's contract), so a short
//   call after an idle costs what it did before, not the move.
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Moves the calling thread to another CPU of its affinity mask if it runs
// on `cpu`; leaves the mask as it was. Does nothing where the mask cannot
// be read or set (more CPUs than cpu_set_t holds, a seccomp filter) or
// holds no other CPU. Not atomic: a mask set on this thread from outside
// between the two calls (taskset -a -p) is undone, and should the restore
// fail (a cpuset shrunk between them) the thread keeps the narrower mask.
void step_off_cpu(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getcpu() != cpu) return;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0 || !CPU_ISSET(cpu, &mask) || CPU_COUNT(&mask) < 2) return;
  cpu_set_t others = mask;
  CPU_CLR(cpu, &others);
  if (sched_setaffinity(0, sizeof others, &others) == 0) sched_setaffinity(0, sizeof mask, &mask);
}

}  // namespace

template <typename Ready>
void ThreadPool::poll_until(Ready ready) const {
  if (!fits_cpus_) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(kPollMicros);
  for (unsigned i = 1; !ready(); ++i) {
    if (i % 64 != 0) {
      cpu_relax();
    } else {
      if (std::chrono::steady_clock::now() >= deadline) return;
      sched_yield();
    }
  }
}

ThreadPool::ThreadPool(int num_threads) : ThreadPool(num_threads, num_threads <= usable_cpus()) {}

ThreadPool::ThreadPool(int num_threads, bool fits_cpus)
    : fits_cpus_(fits_cpus), owner_generation_(fork_generation()), owner_pid_(::getpid()) {
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
    caller_cpu_ = fits_cpus_ ? sched_getcpu() : -1;
    const uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
    entry_.store(open_entry(generation), std::memory_order_relaxed);
    finished_.store(0, std::memory_order_relaxed);
    generation_.store(generation, std::memory_order_release);
  }
  if (workers > 1) start_cv_.notify_all();
  job.fn(job.ctx, 0);
  if (workers > 1) {
    const int entered = static_cast<int>(entry_.fetch_or(kClosed, std::memory_order_acq_rel) & kEnteredMask);
    poll_until([&] { return finished_.load(std::memory_order_acquire) == entered; });
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) == entered; });
    job_ = Job{};
  }
}

bool ThreadPool::enter(uint64_t generation) {
  const uint64_t open = open_entry(generation);
  uint64_t entry = entry_.load(std::memory_order_acquire);
  // Another generation's entry: the caller has closed this job and started
  // the next (a match with a job 2^32 runs later: see worker_loop).
  while ((entry & ~kEnteredMask) == open) {
    if (entry_.compare_exchange_weak(entry, entry + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      return true;
  }
  return false;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    Job job{};
    int caller_cpu = -1;
    poll_until([&] { return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_acquire) != seen; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= active_) continue;
      job = job_;
      caller_cpu = caller_cpu_;
    }
    step_off_cpu(caller_cpu);
    if (!enter(seen)) continue;
    // Entered, the job cannot change until this thread finishes; another
    // generation here means the 32 bits enter() compares wrapped round
    // while this thread slept (2^32 jobs: stopped in a debugger), and the
    // job it copied is gone: finish the new one's entry without running.
    if (generation_.load(std::memory_order_acquire) == seen) job.fn(job.ctx, index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.fetch_add(1, std::memory_order_release);
      done_cv_.notify_one();
    }
  }
}

}  // namespace moegrad::runtime
