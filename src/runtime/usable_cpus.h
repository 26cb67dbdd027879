// How many CPUs the calling thread may run on: the default thread count of a
// context and the thread counts `moegrad bench` times by default. A process
// started under `taskset`, `numactl --physcpubind` or in a container with a
// cpuset sees fewer CPUs than are online; a pool as large as the online
// count would then time-slice its workers on the few CPUs it has (every
// worker also gets its own workspace region and its own share of the items,
// each of which packs its panels again).
#pragma once

#include <cstdint>

namespace moegrad::runtime {

// The CPUs in the calling thread's affinity mask (sched_getaffinity), or the
// online CPUs where the mask cannot be read; at least 1. A CPU-time quota
// (cgroup cpu.max) is not a CPU set and is not counted.
int64_t usable_cpus();

}  // namespace moegrad::runtime
