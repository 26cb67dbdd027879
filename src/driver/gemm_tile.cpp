#include "driver/gemm_tile.h"

#include <cstddef>
#include <algorithm>

namespace moegrad::driver {

void compute_tile(const GradXProblem& p, const plan::GradXPlan& plan, int64_t g, const int32_t* rows,
                  size_t count, size_t k0, size_t kn, float* c, size_t ldc, TileScratch* scratch) {
  const kernels::GemmKernels& k = *plan.kernels;
  const int dt = static_cast<int>(p.dtype);
  const size_t elem = static_cast<size_t>(dtype_bytes(p.dtype));
  const auto* w_g = static_cast<const std::byte*>(p.weight) + g * p.w_g * static_cast<int64_t>(elem);
  const size_t N = static_cast<size_t>(p.N);
  const bool single_block = N <= plan.kc;

  for (size_t pc = 0; pc < N; pc += plan.kc) {
    const size_t kc = std::min(plan.kc, N - pc);
    // Weight panel: nc columns of grad_x, [kc][NR] per micro-panel.
    if (!(single_block && scratch->packed_expert == g)) {
      for (size_t jr = 0; jr < kn; jr += k.nr)
        k.pack_b[dt](w_g, p.w_k, p.w_n, k0 + jr, std::min(k.nr, kn - jr), pc, kc,
                     scratch->b_pack + (jr / k.nr) * kc * k.nr);
      scratch->packed_expert = single_block ? g : -1;
    }
    // grad_y panel: the slot's rows, gathered, [kc][MR] per micro-panel.
    for (size_t ir = 0; ir < count; ir += k.mr)
      k.pack_a[dt](p.grad_y, p.gy_row, p.gy_col, rows + ir, std::min(k.mr, count - ir), pc, kc,
                   scratch->a_pack + (ir / k.mr) * kc * k.mr);
    // The B micro-panel stays in L1 while A micro-panels stream past it.
    for (size_t jr = 0; jr < kn; jr += k.nr) {
      const float* b = scratch->b_pack + (jr / k.nr) * kc * k.nr;
      for (size_t ir = 0; ir < count; ir += k.mr)
        k.ukernel(kc, scratch->a_pack + (ir / k.mr) * kc * k.mr, b, c + ir * ldc + jr, ldc,
                  std::min(k.mr, count - ir), std::min(k.nr, kn - jr), pc > 0);
    }
  }
}

}  // namespace moegrad::driver
