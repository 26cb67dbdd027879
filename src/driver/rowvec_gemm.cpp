#include "driver/rowvec_gemm.h"

#include <algorithm>
#include <cstddef>

namespace moegrad::driver {

void rowvec_gemm_tile(const kernels::RowvecKernels& k, DType dtype, size_t kc, const GemmOperand& a,
                      const int32_t* rows, size_t count, const GemmOperand& b, size_t j0, size_t cols, int64_t n,
                      float* ct, size_t ldct, const RowvecScratch& scratch) {
  const int dt = static_cast<int>(dtype);
  const size_t elem = dtype_bytes(dtype);
  const int64_t row_bytes = b.outer_stride * static_cast<int64_t>(elem);
  const auto* w = static_cast<const std::byte*>(b.data);
  const size_t total = static_cast<size_t>(n);
  if (total == 0) {  // an empty reduction is +0.0 (the start of every chain)
    for (size_t j = 0; j < cols; ++j) std::fill(ct + j * ldct, ct + j * ldct + count, 0.0f);
    return;
  }
  for (size_t pc = 0; pc < total; pc += kc) {
    const size_t kb = std::min(kc, total - pc);
    // Panels of the slot's rows for this reduction block; they stay in L2
    // while every strip of the column block passes over them.
    for (size_t ir = 0; ir < count; ir += k.panel)
      k.pack_panel[dt](a.data, a.outer_stride, rows + ir, std::min(k.panel, count - ir), pc, kb,
                       scratch.panels + (ir / k.panel) * kc * k.panel);
    // One strip of weight rows stays in L1 while the panels stream past it.
    for (size_t jc = 0; jc < cols; jc += k.strip) {
      const size_t cn = std::min(k.strip, cols - jc);
      k.copy_strip[dt](b.data, b.outer_stride, j0 + jc, cn, pc, kb, scratch.w_strip);
      // The next strip (the following weight rows, or the first rows of the
      // next reduction block) is prefetched into L1 by this strip's last
      // kernel call: early enough to hide DRAM latency, late enough that
      // the panels streaming through L1 do not evict it before the copy
      // (measured: 0.87-0.88x the time of spreading it over all calls).
      kernels::PrefetchRect next;
      if (jc + k.strip < cols) {
        next = {w + static_cast<int64_t>(j0 + jc + k.strip) * row_bytes + static_cast<int64_t>(pc * elem), row_bytes,
                std::min(k.strip, cols - jc - k.strip), (kb * elem + 63) / 64};
      } else if (pc + kc < total) {
        next = {w + static_cast<int64_t>(j0) * row_bytes + static_cast<int64_t>((pc + kc) * elem), row_bytes,
                std::min(k.strip, cols), (std::min(kc, total - pc - kc) * elem + 63) / 64};
      }
      const size_t last = (count - 1) / k.panel * k.panel;
      for (size_t ir = 0; ir < count; ir += k.panel)
        k.ukernel(kb, scratch.w_strip, scratch.panels + (ir / k.panel) * kc * k.panel, ct + jc * ldct + ir, ldct,
                  std::min(k.panel, count - ir), cn, pc > 0, ir == last ? next : kernels::PrefetchRect{});
    }
  }
}

}  // namespace moegrad::driver
