#include "cpu_affinity.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <memory>
#include <thread>

namespace moegrad::test {
namespace {

// A mask sized for every configured CPU (a cpu_set_t holds only 1024).
struct Mask {
  explicit Mask(size_t cpus) : cpus(cpus), bytes(CPU_ALLOC_SIZE(cpus)), set(CPU_ALLOC(cpus), &free_mask) {
    if (set) CPU_ZERO_S(bytes, set.get());
  }
  static void free_mask(cpu_set_t* s) { CPU_FREE(s); }
  size_t cpus, bytes;
  std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> set;
};

size_t configured_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_CONF);
  return n > CPU_SETSIZE ? static_cast<size_t>(n) : CPU_SETSIZE;
}

}  // namespace

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  const Mask mask(configured_cpus());
  if (!mask.set || sched_getaffinity(0, mask.bytes, mask.set.get()) != 0) return cpus;
  for (size_t c = 0; c < mask.cpus; ++c)
    if (CPU_ISSET_S(c, mask.bytes, mask.set.get())) cpus.push_back(static_cast<int>(c));
  return cpus;
}

bool run_pinned(const std::vector<int>& cpus, const std::function<void()>& body) {
  bool pinned = false;
  std::thread([&] {
    const Mask mask(configured_cpus());
    if (!mask.set) return;
    for (int c : cpus) CPU_SET_S(static_cast<size_t>(c), mask.bytes, mask.set.get());
    pinned = pthread_setaffinity_np(pthread_self(), mask.bytes, mask.set.get()) == 0;
    if (pinned) body();
  }).join();
  return pinned;
}

}  // namespace moegrad::test
