// The data-cache sizes the plan fits its blocks to (plan/grad_x_plan.cpp).
// They change speed, never bits. A context takes them from the OS
// (runtime::cpu_features) or from MOEGRAD_L1D_BYTES / MOEGRAD_L2_BYTES, for
// a VM that reports none or nonsense, and for tests.
#pragma once

#include <cstddef>

namespace moegrad::plan {

struct CacheSizes {
  size_t l1d = 48 * 1024;    // per core
  size_t l2 = 1024 * 1024;   // per core
};

// The range a size from the environment must lie in.
inline constexpr size_t kMinL1dBytes = 16 * 1024, kMaxL1dBytes = 1024 * 1024;
inline constexpr size_t kMinL2Bytes = 128 * 1024, kMaxL2Bytes = 64 * 1024 * 1024;

}  // namespace moegrad::plan
