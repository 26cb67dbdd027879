// How many CPUs the calling thread may use: the default thread count of a
// context and the thread counts `moegrad bench` times by default. A process
// started under `taskset`, `numactl --physcpubind` or in a container with a
// cpuset sees fewer CPUs than are online, and one in a container with a
// CPU limit gets less CPU time than its CPUs have (runtime/cgroup_cpu_limit.h);
// a pool as large as the online count would then time-slice its workers on
// what it has (every worker also gets its own workspace region and its own
// share of the items, each of which packs its panels again).
#pragma once

#include <cstdint>
#include <optional>

namespace moegrad::runtime {

struct CpuBudget {
  // The CPUs in the calling thread's affinity mask (sched_getaffinity), or
  // the online CPUs where the mask cannot be read; at least 1.
  int64_t affinity = 1;
  // The CPU time its cgroups allow, in CPUs, if limited.
  std::optional<double> cgroup_limit;

  // min(affinity, the limit rounded up), at least 1: a limit of 1.5 CPUs
  // gets 2 workers, which then share it.
  int64_t usable() const;
};

CpuBudget cpu_budget();

int64_t usable_cpus();  // cpu_budget().usable()

}  // namespace moegrad::runtime
