// The CPU time a process's cgroups allow it, in CPUs: `docker run --cpus`,
// a Kubernetes CPU limit, systemd's CPUQuota=. Unlike a cpuset, such a
// quota leaves the affinity mask as it is: in a 2-CPU container on a 64-CPU
// host a process sees 64 CPUs, and a pool of 64 workers would spend the
// quota in the first 1/32 of each scheduling period, then wait, every
// worker throttled, for the next one (and a run waits for its slowest).
#pragma once

#include <optional>
#include <string>

namespace moegrad::runtime {

// quota / period of the tightest CPU bandwidth limit on the cgroup the
// calling thread is in (its process's, unless it was moved to a threaded
// child) or on one of its ancestors up to the root of the mounted
// hierarchy (limits above it, as on a container's parents outside its
// cgroup namespace, cannot be seen): cgroup v2's cpu.max, the v1 cpu controller's cpu.cfs_quota_us
// and cpu.cfs_period_us. nullopt where no limit is set, or none can be read
// (no /proc, no cgroup mounted, a cgroup outside the mount). `root` is put
// before every path it reads (/proc/thread-self/cgroup, else
// /proc/self/cgroup; /proc/self/mountinfo and
// the mounts they name): empty on a real system, a directory with a made-up
// tree in tests. Never throws.
std::optional<double> cgroup_cpu_limit(const std::string& root = "");

}  // namespace moegrad::runtime
