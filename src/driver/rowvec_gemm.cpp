#include "driver/rowvec_gemm.h"

#include <algorithm>
#include <cstddef>

namespace moegrad::driver {

void rowvec_gemm_tile(const kernels::RowvecKernels& k, DType dtype, size_t kc, size_t pack_span, const GemmOperand& a,
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
  const size_t panels = (count + k.panel - 1) / k.panel;
  const size_t last = (panels - 1) * k.panel;
  // The panel of rows [ir, ir + PANEL) for reduction block pc of the span
  // starting at ps.
  auto panel_at = [&](size_t ps, size_t pc, size_t ir) {
    return scratch.panels + ((pc - ps) / kc * panels + ir / k.panel) * kc * k.panel;
  };
  // Weight rows [j0 + jc, + rows_n) at reduction offset p, lines for span.
  auto rect = [&](size_t jc, size_t rows_n, size_t p, size_t span) {
    const size_t lines = (span * elem + 63) / 64;
    return kernels::PrefetchRect{w + static_cast<int64_t>(j0 + jc) * row_bytes + static_cast<int64_t>(p * elem),
                                 row_bytes, rows_n, lines, 0, rows_n * lines};
  };
  for (size_t ps = 0; ps < total; ps += pack_span) {
    const size_t pe = std::min(total, ps + pack_span);
    // Panels of the slot's rows for the whole span; they stay in L2 while
    // every strip of the column block passes over them.
    for (size_t pc = ps; pc < pe; pc += kc)
      for (size_t ir = 0; ir < count; ir += k.panel)
        k.pack_panel[dt](a.data, a.outer_stride, rows + ir, std::min(k.panel, count - ir), pc,
                         std::min(kc, total - pc), panel_at(ps, pc, ir));
    // One strip of weight rows, one reduction block at a time, stays in L1
    // while the panels stream past it; a strip runs the whole span.
    for (size_t jc = 0; jc < cols; jc += k.strip) {
      const size_t cn = std::min(k.strip, cols - jc);
      for (size_t pc = ps; pc < pe; pc += kc) {
        const size_t kb = std::min(kc, total - pc);
        k.copy_strip[dt](b.data, b.outer_stride, j0 + jc, cn, pc, kb, scratch.w_strip);
        // What the next copy reads (the same rows' next block, the next
        // strip's first block, or the next span's first strip) is
        // requested while this block runs: into L2, a share per kernel call
        // spread over its steps, so DRAM's latency is hidden without a
        // burst of misses; then all of it into L1 by the last call, from
        // L2 quickly, late enough that the panels streaming through L1 do
        // not evict it before the copy (which reads it in one go, 14 rows
        // whose lines share L1 sets when a row is 4 KiB apart). Measured
        // against the last call alone fetching it from DRAM (which stalled
        // on the prefetch itself, the miss buffers full), end to end: zmoe
        // 0.96x / 0.97x the time with 1 / 2 threads, fine-grained 0.94x /
        // 0.98x, fast bf16 0.96x / 0.97x; AVX2 0.97x on zmoe, 0.92x / 0.97x
        // on fine-grained.
        kernels::PrefetchRect next;
        if (pc + kc < pe) {
          next = rect(jc, cn, pc + kc, std::min(kc, total - pc - kc));
        } else if (jc + k.strip < cols) {
          next = rect(jc + k.strip, std::min(k.strip, cols - jc - k.strip), ps, std::min(kc, total - ps));
        } else if (pe < total) {
          next = rect(0, std::min(k.strip, cols), pe, std::min(kc, total - pe));
        }
        for (size_t ir = 0, call = 0; ir < count; ir += k.panel, ++call) {
          kernels::PrefetchRect pf = next;
          if (ir != last) {
            pf.begin = next.end * call / panels;
            pf.end = next.end * (call + 1) / panels;
            pf.to_l2 = true;
          }
          k.ukernel(kb, scratch.w_strip, panel_at(ps, pc, ir), ct + jc * ldct + ir, ldct,
                    std::min(k.panel, count - ir), cn, pc > 0, pf);
        }
      }
    }
  }
}

}  // namespace moegrad::driver
