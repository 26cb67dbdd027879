#include "driver/rowvec_gemm.h"

#include <algorithm>
#include <cstddef>

#include "runtime/cpu_features.h"

namespace moegrad::driver {

LastPanelCalls last_panel_calls(const kernels::RowvecKernels& k, size_t count) {
  const size_t panels = (count + k.panel - 1) / k.panel, tail = count - (panels - 1) * k.panel;
  // The narrow kernel serves only AMD CPUs, where it was measured (Zen 5,
  // family 1Ah, and Zen 4, family 19h; no other family 19h CPU has
  // AVX-512). A last panel, with vectors along grad_y rows, costs a whole
  // vector per weight row whatever its rows; the narrow kernel's vectors
  // run along the weight rows, so it costs one per grad_y row, though its
  // chains (kc FMAs, 4 cycles each) bound it and the strip's transpose adds
  // shuffles. kernel_bench on the Zen 5: 0.47-0.52x the time of the 8-row
  // tail for 1-4 rows, 0.61-0.66x for 8. Fused, two builds alternating call
  // by call: experts of exactly 68 rows (a 4-row tail) 0.90-0.93x,
  // fine-grained 0.98x with one thread and 0.98-0.99x with two, zmoe
  // 0.99-1.0x. On the Zen 4, where a zmm FMA or shuffle costs two of the
  // tail's ymm FMAs, it pays as well: 68 rows 0.91-0.93x with one thread,
  // 0.93x with two, exact bf16 0.87x; fine-grained 0.986x and 0.976x, zmoe
  // 1.00x.
  // Up to 12 rows (its most) on both families, but on a Zen 5 a slot of
  // one panel keeps it to 8. On the Zen 4, 10 and 12 rows took 0.75x and
  // 0.90x the 16-row tile's time in kernel_bench (754-764 and 903-938 ns
  // against 989-1039); fused, two builds alternating call by call, one
  // thread, against 8: experts of 137 rows (a 9-row tail) 0.971x the time,
  // 140 rows (12) 1.004x, 10 rows (one panel) 0.843x, 12 rows 0.946x;
  // fine-grained 0.990x, with two threads 0.996x, exact bf16 0.987x; zmoe
  // 0.998x and 0.996x. On the Zen 5, which issues twice the zmm FMAs a
  // cycle, 10 and 12 rows took 0.80x and 0.92x the 16-row tile's time
  // (492 and 569 ns against 617); fused as above against 8: 137 rows
  // 0.983x, with two threads 0.978x, exact bf16 0.976x, 140 rows 0.979x;
  // zmoe 1.000x and 0.999x, fine-grained 0.983x and 1.003x (an A/A run
  // read 0.992x, quartiles 0.96-1.02x); but slots of one panel, whose one
  // call also requests the next strip, took 1.03x at 10 rows per expert
  // and 1.22x at 12.
  const unsigned amd_family = runtime::tuning_amd_family();
  const size_t narrow_max = k.narrow_ukernel == nullptr || amd_family < 0x19u ? 0 : k.narrow_rows;
  // Where its call is a slot's only one, or follows a 16-row call (below),
  // the Zen 5 keeps it to 8 rows.
  const size_t narrow_cap = amd_family == 0x19u ? narrow_max : std::min<size_t>(narrow_max, 8);
  if (tail <= (panels > 1 ? narrow_max : narrow_cap)) return {0, tail};
  // A last panel of 17 to 16 + narrow_cap rows behind full ones runs as its
  // first 16 rows (one zmm vector) and the narrow kernel on the rest, from
  // the same panel and into the same Ct rows: on the Zen 4 the 24-row tile
  // took 0.85x a full panel's time for 0.75x its FMAs (kernel_bench: 1771
  // ns against 1033 + 502 for 16 rows and a 4-row narrow call). Measured
  // fused as above, narrow kernel up to 8 rows, one thread: experts of 148
  // rows (a 20-row tail) 0.976x the time, exact bf16 0.958x; zmoe 0.987x,
  // with two threads 0.989x; fine-grained 1.008x and 0.997x, 52 rows (two
  // panels) 1.00x (A/A noise 0.99-1.02x); then with up to 12, 154 rows
  // (16 + 10 against a 26-row tile) 0.988x, 90 rows 0.964x. Not for a slot
  // of one panel: at 20 rows that took 1.06x, its one call being the one
  // that requests the next strip into L1. On a Zen 5 only up to 24 rows:
  // there the 24-row tile takes a full panel's time (1067 ns against 1087;
  // ymm and zmm FMAs issue alike), so 16 + up to 8 rows saves (617 + 327 to
  // 411 ns), but 16 + 10 or 12 rows (617 + 492 or 569) would cost more than
  // the whole panel.
  const size_t half = k.panel / 2;
  if (k.panel == 32 && panels > 1 && tail > half && tail - half <= narrow_cap) return {half, tail - half};
  return {tail, 0};
}

void rowvec_gemm_tile(const kernels::RowvecKernels& k, DType dtype, size_t kc, size_t pack_span, const GemmOperand& a,
                      const int32_t* rows, size_t count, const GemmOperand& b, size_t j0, size_t cols, int64_t n,
                      float* ct, size_t ldct, const RowvecScratch& scratch) {
  const int dt = static_cast<int>(dtype);
  const size_t elem = dtype_bytes(dtype);
  const int64_t row_bytes = b.outer_stride * static_cast<int64_t>(elem);
  const auto* w = static_cast<const std::byte*>(b.data);
  const size_t total = static_cast<size_t>(n);
  const size_t panels = (count + k.panel - 1) / k.panel;
  const size_t last = (panels - 1) * k.panel;
  const size_t kc_words = k.words(kc);
  // The panel of rows [ir, ir + PANEL) for reduction block pc of the span
  // starting at ps.
  auto panel_at = [&](size_t ps, size_t pc, size_t ir) {
    return scratch.panels + ((pc - ps) / kc * panels + ir / k.panel) * kc_words * k.panel;
  };
  // Weight rows [j0 + jc, + rows_n) at reduction offset p, its lines for
  // span elements (of them, `whole` only the lines the span fills).
  auto rect = [&](size_t jc, size_t rows_n, size_t p, size_t span, bool whole) {
    const size_t lines = whole ? span * elem / 64 : (span * elem + 63) / 64;
    return kernels::NextStrip{w + static_cast<int64_t>(j0 + jc) * row_bytes + static_cast<int64_t>(p * elem),
                              row_bytes, rows_n, lines, 0, rows_n * lines};
  };
  // Two strip buffers: while a block's kernel calls read one, the last call
  // copies the next block's strip into the other (strips that are the
  // weight rows' bytes unchanged; with a single call per block its loads
  // would come from DRAM, so then the next strip is only requested, and
  // copied afterwards).
  float* strip[2] = {scratch.w_strip, scratch.w_strip + k.strip_floats};
  size_t cur = 0;
  bool staged = false;  // strip[cur] already holds the block's strip
  const bool can_stage = k.raw_strip[dt] && panels > 1;
  // The share requests into L1 and the narrow call without a share, below,
  // were measured on a Zen 5 (family 1Ah) only.
  const bool zen5_or_later = runtime::tuning_amd_family() >= 0x1au;
  const bool shares_to_l1_ok = zen5_or_later && k.panel == 32;
  const LastPanelCalls tail_calls = last_panel_calls(k, count);
  // On a Zen 5 a narrow first call (the slot's short last panel) makes
  // no requests where another call before the last can: the other
  // calls share them. Its few, latency-bound FMAs hid them worse
  // than a full panel's (BM_rowvec_slot, 137 rows, three alternating
  // runs: whole slot / kernel calls alone 1.26-1.31x with them,
  // 1.09-1.22x without). Measured fused, two builds alternating call
  // by call: experts of exactly 137 rows (a 9-row tail) 0.957-0.976x
  // the time in six runs of seven (1.005x in the other; A/A runs
  // 0.988-1.020x), zmoe 0.990-1.001x, with two threads 0.989x,
  // fine-grained 0.967x and 1.006x, with two threads 0.986x,
  // fine-grained bf16 0.964x and 0.989x, zmoe bf16 0.999x.
  const size_t skip = zen5_or_later && tail_calls.main == 0 && tail_calls.narrow > 0 && panels > 2 ? 1 : 0;
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
        if (!staged) k.copy_strip[dt](b.data, b.outer_stride, j0 + jc, cn, pc, kb, strip[cur]);
        // The next block (the same rows' next reduction block, the next
        // strip's first one, or the next span's first strip), if any.
        size_t next_jc = jc, next_pc = pc + kc;
        if (next_pc >= pe) {
          next_pc = ps;
          next_jc = jc + k.strip;
          if (next_jc >= cols) {
            next_jc = 0;
            next_pc = pe;
          }
        }
        const bool has_next = next_pc < total;
        const size_t next_cn = std::min(k.strip, cols - next_jc), next_kb = std::min(kc, total - next_pc);
        const bool stage = can_stage && has_next;
        // What the next block's strip reads is requested while this block
        // runs: into L2, a share per kernel call but the last, spread over
        // its steps, so DRAM's latency is hidden without a burst of misses
        // (with the core's miss buffers full the prefetch itself stalls);
        // then the last call copies it from L2 into the other buffer between
        // its FMAs (not staging, f16 and bf16 widened: requests all of it
        // into L1 for the copy above; f32 and fast bf16 slots of at most
        // 16 rows request it into L2, below).
        // Measured, same-process A/B: the L2 shares against the last call
        // alone requesting everything from DRAM, zmoe 0.96x / 0.97x the time
        // with 1 / 2 threads, fine-grained 0.94x / 0.98x, fast bf16
        // 0.96-0.97x, AVX2 0.92-0.97x; the copy in the last call against
        // the separate copy (perf: 4-6% of the time), zmoe 0.975x / 0.94x,
        // fine-grained 0.97x / 0.99x, AVX2 0.98-0.99x; fast bf16 zmoe
        // 0.93x / 0.91x, fine-grained 0.92x / 0.97x.
        kernels::NextStrip next;
        if (has_next) next = rect(next_jc, next_cn, next_pc, next_kb, false);
        // A slot of at most 16 rows (few rows per expert, where reading
        // the weights is most of the cost) makes one short kernel call per
        // block: one panel on either ISA, never staged (AVX2's panels are
        // 16 rows, so there the rule covers every unstaged slot; AVX-512's
        // slots of 17-31 rows keep the L1 request, measured only at 32).
        // Requesting the next strip (14 KiB on AVX-512) from DRAM into L1
        // within it filled the L1's miss buffers and stalled the call (perf,
        // 4 rows per expert: the strip copy 26% of the time, the kernel
        // 55%); into L2, the copy reads it from there. Measured, fused only,
        // alternating builds, K 2048: at 2-16 rows per expert (N 768, 1408
        // and 14336) 0.66-0.95x the time with one and two threads, fast
        // bf16 0.53-0.93x, AVX2 0.67-0.86x. Not for 32 rows, whose longer
        // call hides the L1 request (f32 and fast bf16 took 1.02-1.06x),
        // nor for widened f16/bf16, whose strips are half the bytes (bf16
        // at 16 rows took 1.03-1.13x); with this rule both read 0.98-1.02x.
        if (count <= 16 && k.raw_strip[dt]) next.to_l2 = true;
        kernels::NextStrip last_call = next;
        if (stage) {
          // The kernel copies whole lines; the rest of a row (a reduction
          // block not a multiple of a line) is written here, into the idle
          // buffer, padded with zeros to whole 32-bit words as copy_strip
          // pads it, and zeros in the rows past a narrow strip, so no
          // accumulator ever sees stale values.
          last_call = rect(next_jc, next_cn, next_pc, next_kb, true);
          last_call.copy_to = strip[1 - cur];
          last_call.copy_ld = k.strip_ld;
          const size_t done = last_call.lines * 64, bytes = next_kb * elem, padded = (bytes + 3) / 4 * 4;
          for (size_t c = 0; c < k.strip; ++c) {
            auto* dst = reinterpret_cast<std::byte*>(strip[1 - cur] + c * k.strip_ld);
            if (c < next_cn) {
              const std::byte* src = next.first + static_cast<int64_t>(c) * row_bytes;
              std::copy(src + done, src + bytes, dst + done);
              std::fill(dst + bytes, dst + padded, std::byte{0});
            } else {
              std::fill(dst, dst + padded, std::byte{0});
            }
          }
        }
        const size_t shares = stage ? panels - 1 : panels;
        // On a Zen 5, staged f32 strips whose requests fit in one or two
        // calls (slots of 33-96 rows, and of 97-108, whose narrow first call
        // makes none: see above) are requested into L1 instead: the
        // copy follows a call or two later, and the L2 requests were not
        // served in time (perf, fine-grained: a third of the main kernel's
        // samples on the copy's loads, and its L2 requests stalling).
        // Measured there, two builds alternating call by call, f32:
        // fine-grained 0.92-0.99x the time with one thread, 0.87-1.0x with
        // two (the more loaded the host, the larger the gain); 41 rows per
        // expert 1.0x and 0.97x. Not with more share calls, whose lines
        // would wait longer in L1 (all shares into L1: zmoe 1.04-1.05x), nor
        // for bf16 or fast bf16 (0.99-1.06x), nor on AVX2 (41 rows:
        // 1.035x), nor on a Zen 4 (fine-grained 1.04x with one thread and
        // 1.05x with two, against an A/A noise of 0.99-1.02x); other CPUs
        // were not measured.
        // Counting the narrow call out of the L1 rule's calls, against
        // counting it in, two builds alternating call by call, experts of
        // exactly 100 and 104 rows: K 7168, N 2048 0.972-0.993x the time with
        // one thread, 0.956-0.983x with two; K 2048, N 768 0.975-1.005x, with
        // two threads 0.964x (A/A runs 0.997-1.013x); zmoe 1.006x.
        const bool shares_to_l1 = shares_to_l1_ok && stage && dtype == DType::kF32 && shares - skip <= 2;
        for (size_t call = 0; call < panels; ++call) {
          // The slot's last panel, which may be short, runs first, so that
          // the block's last call, which copies the next strip between its
          // FMAs, is a whole panel with up to four times a tail's FMAs to
          // hide that in. Each Ct element is its own chain: the order of
          // the calls changes no bits. Measured, fused only, same machine,
          // alternating builds: zmoe f32 0.986-0.993x the time with one
          // thread, 0.99-1.0x with two; experts of exactly 136 rows (an
          // 8-row tail each) 0.96-0.98x; fine-grained 0.98-0.99x with one
          // and two; fast bf16 1.0-1.005x.
          const size_t ir = call == 0 ? last : (call - 1) * k.panel;
          const bool final_call = call == panels - 1;
          kernels::NextStrip share = next;
          if (!final_call) {
            const size_t of = shares - skip;
            share.begin = call < skip ? 0 : next.end * (call - skip) / of;
            share.end = call < skip ? 0 : next.end * (call - skip + 1) / of;
            share.to_l2 = !shares_to_l1;
          }
          const float* panel = panel_at(ps, pc, ir);
          float* const ct_at = ct + jc * ldct + ir;
          const kernels::NextStrip& calls_next = final_call ? last_call : share;
          if (call > 0) {
            k.ukernel(kb, strip[cur], panel, ct_at, ldct, std::min(k.panel, count - ir), cn, pc > 0, calls_next);
          } else if (tail_calls.narrow == 0 || tail_calls.main == 0) {
            const kernels::RowvecUkernelFn ukernel = tail_calls.narrow > 0 ? k.narrow_ukernel : k.ukernel;
            ukernel(kb, strip[cur], panel, ct_at, ldct, count - ir, cn, pc > 0, calls_next);
          } else {  // never the final call: a split needs panels > 1
            // The block's share of requests split about as the two calls'
            // FMAs: all of it in the 16-row call, 148 rows took 0.988-1.003x.
            kernels::NextStrip first_share = share, rest_share = share;
            first_share.end = rest_share.begin = share.begin + (share.end - share.begin) * 2 / 3;
            k.ukernel(kb, strip[cur], panel, ct_at, ldct, tail_calls.main, cn, pc > 0, first_share);
            k.narrow_ukernel(kb, strip[cur], panel + tail_calls.main, ct_at + tail_calls.main, ldct, tail_calls.narrow,
                             cn, pc > 0, rest_share);
          }
        }
        staged = stage;
        if (stage) cur = 1 - cur;
      }
    }
  }
}

}  // namespace moegrad::driver
