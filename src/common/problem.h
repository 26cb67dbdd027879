// A validated grad-x problem: raw pointers, element strides, sizes. Built
// once by validation; the plan and driver never look at a DLTensor again.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace moegrad {

// A 1-D integer tensor (int32 or int64) with an element stride.
struct IndexView {
  const void* data = nullptr;
  bool is_int64 = false;
  int64_t length = 0;
  int64_t stride = 1;

  int64_t at(int64_t i) const {
    const int64_t off = i * stride;
    return is_int64 ? static_cast<const int64_t*>(data)[off]
                    : static_cast<int64_t>(static_cast<const int32_t*>(data)[off]);
  }
};

struct GradXProblem {
  DType dtype = DType::kF32;
  int64_t M = 0, N = 0, K = 0, G = 0;
  int64_t batch = 0, top_k = 0;
  int32_t row_idx_type = 0;    // 0: expanded -> original, 1: original -> expanded
  int32_t group_list_type = 0; // 0: counts, 1: cumsum

  const void* grad_y = nullptr;  // element (i, n) at grad_y[i*gy_row + n*gy_col]
  int64_t gy_row = 0, gy_col = 0;
  const void* weight = nullptr;  // element (g, k, n) at weight[g*w_g + k*w_k + n*w_n]
  int64_t w_g = 0, w_k = 0, w_n = 0;
  IndexView row_idx;             // [L]
  IndexView group_list;          // [G]
  float* grad_x = nullptr;       // element (b, k) at grad_x[b*gx_row + k*gx_col]
  int64_t gx_row = 0, gx_col = 0;
};

}  // namespace moegrad
