// How many fork()s separate this process from the one that started
// something: 0 in that process, more in every process forked from it (and
// from those). A process id cannot tell: a descendant forked after its
// ancestor exited may be given the ancestor's id again.
#pragma once

#include <cstdint>

namespace moegrad::runtime {

// The number of forks behind this process, counted from the first call
// (which installs the pthread_atfork handler that counts them).
uint64_t fork_generation();

}  // namespace moegrad::runtime
