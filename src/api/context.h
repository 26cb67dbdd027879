// The opaque moegrad_context: settings plus the thread pool that runs them.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "moegrad/moegrad.h"
#include "plan/cache_sizes.h"
#include "plan/engine.h"
#include "runtime/fork_safe_mutex.h"
#include "runtime/thread_pool.h"
#include "runtime/usable_cpus.h"

// The settings are atomics: a context may be shared by threads, and a setter
// may run while another thread plans or runs (each reads a setting once).
struct moegrad_context {
  std::atomic<int32_t> num_threads{1};           // resolved, >= 1
  int32_t default_threads = 1;                   // from MOEGRAD_NUM_THREADS or the CPU count
  std::atomic<moegrad_isa> isa{MOEGRAD_ISA_SCALAR};  // resolved, never AUTO
  std::atomic<bool> fast_bf16{false};
  moegrad::plan::Engine engine = moegrad::plan::Engine::kAuto;  // MOEGRAD_ENGINE; fixed at creation
  moegrad::plan::CacheSizes caches;  // the OS's or MOEGRAD_L1D_BYTES / MOEGRAD_L2_BYTES; fixed at creation

  // The pool of num_threads threads (rebuilt by set_num_threads when that
  // changes, so a run itself never allocates, except where the context has
  // no pool of this process: the first run on a new context, in a forked
  // child, or on a default context whose pool could not start at first
  // use, starts one).
  moegrad_status pool(std::shared_ptr<moegrad::runtime::ThreadPool>* out) const;
  // Sets num_threads and the pool together, under the pool lock: when the
  // pool cannot be started, neither changes (no rollback another setter
  // could interleave with).
  moegrad_status resize_pool(int32_t threads);

 private:
  moegrad_status start_pool(int32_t threads) const;  // pool_mutex_ held

  // Fork-safe: a child forked while another thread starts a pool must still
  // take it, to start its own workers.
  mutable moegrad::runtime::ForkSafeMutex pool_mutex_;
  mutable std::shared_ptr<moegrad::runtime::ThreadPool> pool_;
};

namespace moegrad {

// The environment variables a context reads when it is created.
inline constexpr const char* kContextVariables[] = {"MOEGRAD_NUM_THREADS", "MOEGRAD_ISA", "MOEGRAD_ENGINE",
                                                    "MOEGRAD_L1D_BYTES", "MOEGRAD_L2_BYTES"};
// Those the project's own build and test scripts read (setup.py,
// scripts/deps.sh, test.sh's MOEGRAD_TSAN_SUITE_BUILD, test_sanitizers.sh,
// test_fuzz.sh), which the README has people set, and the two that tests
// set for what they run
// (tests/install/install_test.sh, bench/tests/fake_onednn_module.cpp): not
// the library's, but not misspellings either.
inline constexpr const char* kScriptVariables[] = {
    "MOEGRAD_CMAKE_BUILD_DIR", "MOEGRAD_APT_UPDATED",   "MOEGRAD_SANITIZERS",       "MOEGRAD_SANITIZER_CXX",
    "MOEGRAD_SANITIZER_CC",    "MOEGRAD_ASAN_EXCLUDE",  "MOEGRAD_TSAN_TESTS",       "MOEGRAD_FUZZ_CXXFLAGS",
    "MOEGRAD_FUZZ_SEED",       "MOEGRAD_FUZZ_RUNS_NPY", "MOEGRAD_FUZZ_RUNS_GRAD_X", "MOEGRAD_TEST_BENCH_MODULE",
    "MOEGRAD_TEST_FAKE_ONEDNN_ERROR", "MOEGRAD_TSAN_SUITE_BUILD"};

// What a context resolved to, beside what the CPU and OS offer: for reports
// (`moegrad info`, moegrad.info() in Python), never for decisions.
struct ContextInfo {
  std::string cpu;                   // the model name (runtime/cpu_model.h)
  moegrad_isa isa = MOEGRAD_ISA_SCALAR;
  std::vector<const char*> isa_available;  // names of the paths the CPU and OS run, best last
  bool avx512bf16 = false;           // vdpbf16ps, for the fast bf16 mode
  int32_t threads = 1;
  runtime::CpuBudget cpus;           // what the default thread count comes from
  const char* engine = "auto";       // as MOEGRAD_ENGINE names it
  plan::CacheSizes caches;           // what the plan fits its blocks to...
  plan::CacheSizes caches_cap;       // ...at most (larger caches do not grow them)
  size_t os_l1d = 0, os_l2 = 0;      // what the OS reports; 0 when nothing
  // kContextVariables and their values now (unset: nullopt).
  std::vector<std::pair<const char*, std::optional<std::string>>> environment;
  // Other MOEGRAD_* names set (but kScriptVariables), which nothing reads (a
  // misspelled variable is otherwise silently ignored), each with the
  // variable it is at most two edits from, if any.
  std::vector<std::pair<std::string, const char*>> ignored_environment;
};
ContextInfo describe_context(const moegrad_context& ctx);

// The process-wide context used when NULL is passed (created on first use).
moegrad_status default_context(const moegrad_context** ctx);

}  // namespace moegrad
