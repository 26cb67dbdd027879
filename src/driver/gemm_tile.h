// The macro-kernel: loops of packing and micro-kernel calls around one tile
// (BLIS's macro-kernel), shared by the fused driver and the non-fused path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/problem.h"
#include "plan/grad_x_plan.h"

namespace moegrad::driver {

// Per-worker scratch carved from the workspace.
struct TileScratch {
  float* a_pack;
  float* b_pack;
  // Expert and reduction block whose weight panel b_pack holds (-1: none).
  // Reused across slots of one expert when N fits in one kc block.
  int64_t packed_expert = -1;
};

// c[r, j] = sum_{n < N} grad_y[rows[r], n] * weight[g, k0 + j, n] for r < count,
// j < kn, as one fp32 FMA chain per element in ascending n (SPEC §5).
// count <= plan.ms, kn <= plan.nc; c has leading dimension ldc.
void compute_tile(const GradXProblem& p, const plan::GradXPlan& plan, int64_t g, const int32_t* rows,
                  size_t count, size_t k0, size_t kn, float* c, size_t ldc, TileScratch* scratch);

}  // namespace moegrad::driver
