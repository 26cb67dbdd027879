// The data-cache sizes the plan fits its blocks to (plan/grad_x_plan.cpp).
// They change speed, never bits. A context takes them from the OS
// (runtime::cpu_features) or from MOEGRAD_L1D_BYTES / MOEGRAD_L2_BYTES, for
// a VM that reports none or nonsense, and for tests.
#pragma once

#include <cstddef>

namespace moegrad::plan {

// Per core. The defaults are the Zen 5 VM's caches (the plan's rules were
// measured there and on a Zen 4 with a 32 KiB L1d): what a context assumes
// when the OS reports nothing, and the largest caches the plan fits its
// blocks to (larger ones measured no faster).
struct CacheSizes {
  size_t l1d = 48 * 1024;
  size_t l2 = 1024 * 1024;
};

}  // namespace moegrad::plan
