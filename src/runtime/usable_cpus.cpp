#include "runtime/usable_cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>

#include "runtime/cgroup_cpu_limit.h"

namespace moegrad::runtime {
namespace {

int64_t online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 1 ? n : 1;
}

// The kernel refuses (EINVAL) a mask shorter than its own CPU count, so a
// machine with more CPUs than a cpu_set_t holds (1024) takes a larger one.
// Bounded so that a kernel that says EINVAL for another reason cannot make
// it loop.
constexpr size_t kMaxMaskCpus = size_t{1} << 22;

int64_t affinity_cpus() {
  int err = EINVAL;
  for (size_t cpus = CPU_SETSIZE; err == EINVAL && cpus <= kMaxMaskCpus; cpus *= 2) {
    cpu_set_t* mask = CPU_ALLOC(cpus);  // malloc: nothing to throw through the C API
    if (mask == nullptr) break;
    const size_t bytes = CPU_ALLOC_SIZE(cpus);
    const bool read = sched_getaffinity(0, bytes, mask) == 0;
    err = read ? 0 : errno;
    const int n = read ? CPU_COUNT_S(bytes, mask) : 0;
    CPU_FREE(mask);
    if (read) return n >= 1 ? n : online_cpus();
  }
  return online_cpus();
}

}  // namespace

int64_t CpuBudget::usable() const {
  if (!cgroup_limit) return affinity;
  const double limit = std::ceil(*cgroup_limit);
  if (limit >= static_cast<double>(affinity)) return affinity;
  return std::max<int64_t>(static_cast<int64_t>(limit), 1);
}

CpuBudget cpu_budget() { return {affinity_cpus(), cgroup_cpu_limit()}; }

int64_t usable_cpus() { return cpu_budget().usable(); }

}  // namespace moegrad::runtime
