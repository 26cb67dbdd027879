// The calling thread's CPU affinity, for tests of what moegrad does with it
// (default thread counts). Read and set with sched_{get,set}affinity
// directly, not through the library's runtime/usable_cpus.
#pragma once

#include <functional>
#include <vector>

namespace moegrad::test {

// The CPUs the calling thread may run on, in increasing order; empty if the
// mask cannot be read.
std::vector<int> allowed_cpus();

// Runs `body` on a new thread restricted to `cpus` (a subset of
// allowed_cpus()); the caller's own mask is left as it is. False if the
// mask could not be set (then `body` did not run).
bool run_pinned(const std::vector<int>& cpus, const std::function<void()>& body);

}  // namespace moegrad::test
