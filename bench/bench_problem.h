// The problems `moegrad bench` generates, as both sides of the oneDNN
// module boundary (onednn_module.h) see them: compact row-major tensors,
// rows grouped by expert as group_list counts them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "float_formats.h"

namespace moegrad::bench {

// One grad-x problem: int64 expanded -> original routing (row_idx_type 0).
struct BenchProblem {
  cli::FloatFormat format = cli::FloatFormat::kF32;
  const void* grad_y = nullptr;              // [M, N]
  const void* weight = nullptr;              // [G, K, N]
  const int64_t* expanded_row_idx = nullptr; // [M]: original position b*top_k+j, or -1 (padding)
  const int64_t* group_list = nullptr;       // [G]: rows per expert
  int64_t batch = 0, top_k = 0, experts = 0, k = 0, n = 0, m = 0;
};

// What `moegrad bench --op` times: grad-x (issue 3's fused operator against
// the non-fused paths), or one of the layer's other two GEMMs against one
// oneDNN matmul per expert.
enum class BenchOp : int {
  kGradX = 0,
  kForward = 1,     // y [M, N] = x [rows of g] @ weight[g]
  kWeightGrad = 2,  // grad_weight[g] [K, N] = x [rows of g]^T @ grad_y [rows of g]
};

// "grad-x", "forward", "weight-grad": the --op values and the JSON's "op".
inline const char* op_name(BenchOp op) {
  switch (op) {
    case BenchOp::kForward: return "forward";
    case BenchOp::kWeightGrad: return "weight-grad";
    case BenchOp::kGradX: break;
  }
  return "grad-x";
}

inline std::optional<BenchOp> op_from_name(std::string_view name) {
  for (const BenchOp op : {BenchOp::kGradX, BenchOp::kForward, BenchOp::kWeightGrad}) {
    if (name == op_name(op)) return op;
  }
  return std::nullopt;
}

// One layer-operator problem. The group_list sums to m: every row is an
// expert's.
struct LayerOpProblem {
  BenchOp op = BenchOp::kForward;
  cli::FloatFormat format = cli::FloatFormat::kF32;
  const void* x = nullptr;             // [M, K] (the routing's expanded_x)
  const void* weight = nullptr;        // [G, K, N], forward only
  const void* grad_y = nullptr;        // [M, N], weight grad only
  const int64_t* group_list = nullptr; // [G]: rows per expert
  float* out = nullptr;                // y [M, N] or grad_weight [G, K, N], f32: what the baseline writes
  int64_t experts = 0, k = 0, n = 0, m = 0;
};

}  // namespace moegrad::bench
