// Finding the cgroup directories whose limits bind the calling thread: its
// own cgroup in each hierarchy it belongs to, and every ancestor up to the
// root of that hierarchy's mount. The kernel enforces each ancestor's
// limit as well as the leaf's, so a limit is the tightest of them
// (runtime/cgroup_cpu_limit.h, runtime/cgroup_memory_headroom.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace moegrad::runtime::cgroup {

// One cgroup directory, as a path to read files in (`root` prefixed).
struct Dir {
  std::string path;
  bool v2;  // cgroup v2's unified hierarchy, else a v1 hierarchy
};

// Whose cgroups: the calling thread's (its process's, unless it was moved
// to a threaded child: /proc/thread-self/cgroup, else /proc/self/cgroup on
// kernels before 3.17), where a limit applies per thread (CPU time), or the
// process's (/proc/self/cgroup), where the kernel charges the process
// (memory: in cgroup v1 a thread moved to another cgroup's `tasks` still
// charges its pages to its process's).
enum class Scope { kThread, kProcess };

// The directories of the cgroups `scope` names and of their ancestors up to
// the root of the mounted hierarchy, leaf first: limits above the mount,
// as on a container's parents outside its cgroup namespace, cannot be
// seen. Hierarchies: v2's, and v1's that have `v1_controller` ("cpu",
// "memory"; a list naming "cpuset" does not name "cpu"). Nothing for a
// cgroup outside its mount ("/../x", another container's). Empty where
// /proc cannot be read. `root` is put before every path read
// (/proc/thread-self/cgroup, /proc/self/mountinfo and the mounts they
// name): empty on a real system, a directory with a made-up tree in tests.
// Throws only bad_alloc.
std::vector<Dir> dirs(const std::string& root, const char* v1_controller, Scope scope);

// The whole text of a file, or nullopt where it cannot be read.
std::optional<std::string> read_file(const std::string& path);

// `s` without trailing blanks and newlines.
std::string trimmed(const std::string& s);

// `s` cut at every `sep` (an empty string gives no parts).
std::vector<std::string> split(const std::string& s, char sep);

}  // namespace moegrad::runtime::cgroup
