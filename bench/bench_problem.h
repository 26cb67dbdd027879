// One grad-x problem as `moegrad bench` generates it: compact row-major
// tensors, int64 expanded -> original routing (row_idx_type 0), group counts.
#pragma once

#include <cstdint>

#include "float_formats.h"

namespace moegrad::bench {

struct BenchProblem {
  cli::FloatFormat format = cli::FloatFormat::kF32;
  const void* grad_y = nullptr;              // [M, N]
  const void* weight = nullptr;              // [G, K, N]
  const int64_t* expanded_row_idx = nullptr; // [M]: original position b*top_k+j, or -1 (padding)
  const int64_t* group_list = nullptr;       // [G]: rows per expert
  int64_t batch = 0, top_k = 0, experts = 0, k = 0, n = 0, m = 0;
};

}  // namespace moegrad::bench
