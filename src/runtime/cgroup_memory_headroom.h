// How much more memory a process's cgroups let it use. MemAvailable
// (/proc/meminfo) is the whole machine's: in a container started with
// `docker run --memory 4g` on a 64 GiB host it reports most of 64 GiB, and
// an allocation sized by it gets the process OOM-killed at 4 GiB, with no
// message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace moegrad::runtime {

// The least, over the process's cgroups and their ancestors up to the
// mount's root (runtime/cgroup_tree.h: the process's, as the kernel
// charges its pages there whichever cgroup a thread was moved to), of
// limit - working set, in bytes, 0 where the use is past the limit:
//   cgroup v2: memory.max - (memory.current - inactive_file of memory.stat);
//   cgroup v1: memory.limit_in_bytes - (memory.usage_in_bytes -
//              total_inactive_file of memory.stat).
// Inactive file pages are reclaimed before the cgroup runs out, as
// MemAvailable counts them (the working set is what `docker stats` and
// the kubelet count against a limit). Swap is not counted, as
// MemAvailable does not count it. Where a limit can be read but not the
// use, the limit itself (no more can be had). nullopt where no cgroup has
// a limit (v2 "max"; v1's no-limit, the largest page multiple below 2^63,
// or anything from 2^62 on), or none can be read. `root` as in cgroup::dirs. Never
// throws.
std::optional<uint64_t> cgroup_memory_headroom(const std::string& root = "");

}  // namespace moegrad::runtime
