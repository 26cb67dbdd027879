#include "cpu_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <thread>

namespace moegrad::test {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;  // test machines have < 1024 CPUs
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool run_pinned(const std::vector<int>& cpus, const std::function<void()>& body) {
  bool pinned = false;
  std::thread([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) CPU_SET(c, &set);
    pinned = pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
    if (pinned) body();
  }).join();
  return pinned;
}

}  // namespace moegrad::test
