#include "runtime/fork_generation.h"

#include <pthread.h>

#include <atomic>

namespace moegrad::runtime {
namespace {

constinit std::atomic<uint64_t> g_generation{0};
pthread_once_t g_counting = PTHREAD_ONCE_INIT;  // see runtime/cpu_features.cpp: no C++ guard

void count_fork_in_child() { g_generation.fetch_add(1, std::memory_order_relaxed); }

// If the C library cannot record the handler (ENOMEM), forks go uncounted
// and callers fall back on the process id.
void install_counter() { (void)pthread_atfork(nullptr, nullptr, count_fork_in_child); }

}  // namespace

uint64_t fork_generation() {
  pthread_once(&g_counting, install_counter);
  return g_generation.load(std::memory_order_relaxed);
}

}  // namespace moegrad::runtime
