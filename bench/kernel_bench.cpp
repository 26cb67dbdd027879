// Micro-benchmarks of each ISA's micro-kernel and packing routines, so a
// change to one kernel can be measured alone:
//   build/bin/kernel_bench --benchmark_repetitions=5
// Counters: FLOP/s for micro-kernels (the console scales it, "195G/s";
// --benchmark_format=json writes the plain rate), elements/s for packing.
// Every rate is per second of wall time (UseRealTime), as `moegrad bench`'s
// FMA loop measures the peak they are set beside; Google Benchmark's
// default, CPU time, leaves out the time a busy host takes the vCPU away.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "driver/rowvec_gemm.h"
#include "kernels/gemm_kernels.h"

namespace {

using moegrad::DType;
using moegrad::kernels::GemmKernels;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, AlignedFree>;

// huge: a large operand, in transparent huge pages where the kernel grants
// them, as `moegrad bench` maps its inputs.
Buffer make_buffer(size_t floats, float value, bool huge = false) {
  const size_t align = huge ? size_t{2} << 20 : 64;
  const size_t bytes = (floats * sizeof(float) + align - 1) / align * align;
  auto* p = static_cast<float*>(std::aligned_alloc(align, bytes));
  if (huge) (void)madvise(p, bytes, MADV_HUGEPAGE);  // advice only
  for (size_t i = 0; i < floats; ++i) p[i] = value;
  return Buffer(p);
}

const GemmKernels* table(int64_t isa, int64_t fast_bf16) {
  const auto i = static_cast<moegrad_isa>(isa);
  return fast_bf16 ? moegrad::kernels::bf16_pair_kernels_for(i) : moegrad::kernels::gemm_kernels_for(i);
}

// One MR x NR tile over kc, A panels cycling through an L2-sized set as in the
// driver (the B micro-panel stays in L1).
void BM_ukernel(benchmark::State& state) {
  const GemmKernels* k = table(state.range(0), state.range(2));
  if (k == nullptr) return state.SkipWithError("ISA not available on this CPU");
  const size_t kc = static_cast<size_t>(state.range(1));
  const size_t panels = 16;
  Buffer a = make_buffer(panels * kc * k->mr, 0.5f), b = make_buffer(kc * k->nr, 0.25f);
  Buffer c = make_buffer(k->mr * k->nr, 0.0f);
  size_t i = 0;
  for (auto _ : state) {
    k->ukernel(kc, a.get() + (i++ % panels) * kc * k->mr, b.get(), c.get(), k->nr, k->mr, k->nr, false, false, {});
    benchmark::DoNotOptimize(c.get());
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(k->mr * k->nr * kc),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  state.SetLabel(moegrad_isa_name(k->isa));
}

// The row-vector engine's tile (AVX-512 14x32, AVX2 6x16; fast_bf16: the
// AVX512_BF16 pair kernel): a weight strip in L1, grad_y panels cycling
// through an L2-sized set as in the driver. rows: the grad_y rows of the
// call (a full panel is 32 on AVX-512, 16 on AVX2; fewer time the tails);
// FLOP/s counts those rows only, so a tail's figure shows what it wastes.
// narrow: the table's kernel for a last panel of few rows
// (RowvecKernels::narrow_ukernel) instead, to set beside those tails.
void BM_rowvec_ukernel(benchmark::State& state) {
  const GemmKernels* k = table(state.range(0), state.range(3));
  const bool narrow = state.range(4) != 0;
  if (k == nullptr || k->rowvec == nullptr || (narrow && k->rowvec->narrow_ukernel == nullptr))
    return state.SkipWithError("ISA not available on this CPU");
  const moegrad::kernels::RowvecKernels& rv = *k->rowvec;
  const auto ukernel = narrow ? rv.narrow_ukernel : rv.ukernel;
  const size_t kc = static_cast<size_t>(state.range(1));
  const size_t rows = std::min(static_cast<size_t>(state.range(2)), narrow ? rv.narrow_rows : rv.panel);
  const size_t panels = 8;
  Buffer a = make_buffer(panels * kc * rv.panel, 0.5f), w = make_buffer(rv.strip_floats, 0.25f);
  Buffer c = make_buffer(rv.strip * rv.panel, 0.0f);
  size_t i = 0;
  for (auto _ : state) {
    ukernel(kc, w.get(), a.get() + (i++ % panels) * kc * rv.panel, c.get(), rv.panel, rows, rv.strip, false, {});
    benchmark::DoNotOptimize(c.get());
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * rv.strip * kc),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  state.SetLabel(std::string(moegrad_isa_name(k->isa)) +
                 (narrow ? " narrow tail" : rows == rv.panel ? " full panel" : " tail"));
}

// One f32 slot of the row-vector engine as zmoe's plan runs it with one
// thread (an expert's `rows` grad_y rows, a column block of 74 strips:
// 1036 columns on AVX-512 as zmoe's, 444 on AVX2; N 2048 in blocks of kc
// 256), three ways. whole 1: rowvec_gemm_tile itself (grad_y rows packed
// into panels, each block's weight strip staged from memory by the kernel
// calls, the tail kernel the driver picks); the weights of enough experts
// to pass 64 MiB take turns (8 on AVX-512, 19 on AVX2), more than an L3 of
// 32 MiB holds, so they stream from DRAM as zmoe's do. whole 2: the same,
// but every weight row is the expert's first one (a weight stride of 0),
// so the strips are staged from the caches:
// against whole 1, what streaming the weights from DRAM costs. whole 0,
// kernel only: the same kernel calls (the short panel last instead of
// first, on the kernels driver::last_panel_calls picks) over one resident
// strip and panels packed beforehand: against whole 2, what packing and
// staging cost on top of the FMAs, which BM_rowvec_ukernel cannot show and
// a VM without hardware counters cannot count.
void BM_rowvec_slot(benchmark::State& state) {
  const GemmKernels* k = table(state.range(0), 0);
  if (k == nullptr || k->rowvec == nullptr) return state.SkipWithError("ISA not available on this CPU");
  const moegrad::kernels::RowvecKernels& rv = *k->rowvec;
  const size_t rows = static_cast<size_t>(state.range(1));
  const bool whole = state.range(2) != 0, cached = state.range(2) == 2;
  constexpr size_t kN = 2048, kKc = 256, kWeightBytes = size_t{64} << 20;
  const size_t cols = 74 * rv.strip, expert_bytes = cols * kN * sizeof(float);
  const size_t experts = (kWeightBytes + expert_bytes - 1) / expert_bytes;
  const size_t ldct = (rows + rv.panel - 1) / rv.panel * rv.panel, panels = ldct / rv.panel;
  const size_t blocks = kN / kKc, panel_floats = kKc * rv.panel;
  Buffer gy = make_buffer(experts * rows * kN, 0.5f, true), w = make_buffer(experts * cols * kN, 0.25f, true);
  Buffer pan = make_buffer(blocks * panels * panel_floats, 0.5f), strip = make_buffer(2 * rv.strip_floats, 0.25f);
  Buffer ct = make_buffer(cols * ldct, 0.0f);
  std::vector<int32_t> row_of(experts * rows);
  for (size_t r = 0; r < row_of.size(); ++r) row_of[r] = static_cast<int32_t>(r);
  for (size_t pc = 0; pc < kN; pc += kKc)
    for (size_t ir = 0; ir < rows; ir += rv.panel)
      rv.pack_panel[0](gy.get(), kN, row_of.data() + ir, std::min(rv.panel, rows - ir), pc, kKc,
                       pan.get() + (pc / kKc * panels + ir / rv.panel) * panel_floats);
  const moegrad::driver::LastPanelCalls tail = moegrad::driver::last_panel_calls(rv, rows);
  size_t e = 0;
  for (auto _ : state) {
    if (whole) {
      const moegrad::driver::GemmOperand a{gy.get(), static_cast<int64_t>(kN), 1};
      const moegrad::driver::GemmOperand b{w.get() + e * cols * kN, cached ? 0 : static_cast<int64_t>(kN), 1};
      moegrad::driver::rowvec_gemm_tile(rv, DType::kF32, kKc, kKc, a, row_of.data() + e * rows, rows, b, 0, cols,
                                        kN, ct.get(), ldct, {pan.get(), strip.get()});
      e = (e + 1) % experts;
    } else {
      for (size_t pc = 0; pc < kN; pc += kKc)
        for (size_t jc = 0; jc < cols; jc += rv.strip)
          for (size_t ir = 0; ir < rows; ir += rv.panel) {
            const float* panel = pan.get() + (pc / kKc * panels + ir / rv.panel) * panel_floats;
            float* ct_at = ct.get() + jc * ldct + ir;
            if (ir + rv.panel < rows) {
              rv.ukernel(kKc, strip.get(), panel, ct_at, ldct, rv.panel, rv.strip, pc > 0, {});
              continue;
            }
            if (tail.main > 0) rv.ukernel(kKc, strip.get(), panel, ct_at, ldct, tail.main, rv.strip, pc > 0, {});
            if (tail.narrow > 0)
              rv.narrow_ukernel(kKc, strip.get(), panel + tail.main, ct_at + tail.main, ldct, tail.narrow, rv.strip,
                                pc > 0, {});
          }
    }
    benchmark::DoNotOptimize(ct.get());
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * cols * kN),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  state.SetLabel(std::string(moegrad_isa_name(k->isa)) +
                 (cached ? " whole slot, weights cached" : whole ? " whole slot" : " kernel only"));
}

// Packing one zmoe slot's grad_y rows (137 rows x N 2048, f32) into
// row-vector panels, a kc of 256 at a time as the driver does; pad: floats
// added to the rows' stride (0: rows 8 KiB apart, so that every row's line
// of a column falls in one L1 set); experts: how many slots' rows take
// turns (1: the same 1.07 MiB again, from an L2 larger than that or else
// mostly from the L3, as on the Zen VMs' 1 MiB L2; 8: from the L3; 64:
// from DRAM). On the Zen 4 VM, AVX-512, three runs: from DRAM 2.4-3.1 G
// floats/s (10-12 GB/s, what one core draws there) whatever the stride;
// one slot again 6.3-7.8 G/s 8 KiB apart and 7.7-10.5 G/s padded. So
// zmoe's packing (2 % of its time) waits on DRAM's bandwidth per core,
// not on the transposes.
void BM_pack_panel(benchmark::State& state) {
  const GemmKernels* k = table(state.range(0), 0);
  if (k == nullptr || k->rowvec == nullptr) return state.SkipWithError("ISA not available on this CPU");
  const moegrad::kernels::RowvecKernels& rv = *k->rowvec;
  const size_t pad = static_cast<size_t>(state.range(1)), experts = static_cast<size_t>(state.range(2));
  constexpr size_t kRows = 137, kN = 2048, kKc = 256;
  const size_t ld = kN + pad, panels = (kRows + rv.panel - 1) / rv.panel;
  Buffer gy = make_buffer(experts * kRows * ld, 0.5f, true), pan = make_buffer(panels * kKc * rv.panel, 0.0f);
  std::vector<int32_t> row_of(experts * kRows);
  for (size_t r = 0; r < row_of.size(); ++r) row_of[r] = static_cast<int32_t>(r);
  size_t e = 0;
  for (auto _ : state) {
    for (size_t pc = 0; pc < kN; pc += kKc)
      for (size_t ir = 0; ir < kRows; ir += rv.panel)
        rv.pack_panel[0](gy.get(), static_cast<int64_t>(ld), row_of.data() + e * kRows + ir,
                         std::min(rv.panel, kRows - ir), pc, kKc, pan.get() + (ir / rv.panel) * kKc * rv.panel);
    benchmark::DoNotOptimize(pan.get());
    e = (e + 1) % experts;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kRows * kN));
}

// The packed engine's tile with A as copied rows ([MR][ld], the layout for
// grad_y contiguous along N; AVX-512 14x32, AVX2 6x16; fast_bf16: the
// AVX512_BF16 pair kernel, rows of raw bf16 pairs), B in L1, A cycling as
// above.
void BM_rows_a_ukernel(benchmark::State& state) {
  const GemmKernels* k = table(state.range(0), state.range(2));
  if (k == nullptr || k->rows_a == nullptr) return state.SkipWithError("ISA not available on this CPU");
  const size_t kc = static_cast<size_t>(state.range(1));
  const size_t panels = 16, a_panel = k->mr * k->rows_a->ld;
  Buffer a = make_buffer(panels * a_panel, 0.5f), b = make_buffer(kc * k->nr, 0.25f);
  Buffer c = make_buffer(k->mr * k->nr, 0.0f);
  size_t i = 0;
  for (auto _ : state) {
    k->rows_a->ukernel(kc, a.get() + (i++ % panels) * a_panel, b.get(), c.get(), k->nr, k->mr, k->nr, false, false, {});
    benchmark::DoNotOptimize(c.get());
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(k->mr * k->nr * kc),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  state.SetLabel(moegrad_isa_name(k->isa));
}

// Packing one weight micro-panel (NR columns x kc) from a row-major
// [K, N] matrix: the transpose path the driver takes for [G, K, N] weights.
void BM_pack_b(benchmark::State& state) {
  const GemmKernels* k = table(state.range(0), 0);
  if (k == nullptr) return state.SkipWithError("ISA not available on this CPU");
  const auto dtype = static_cast<DType>(state.range(1));
  const size_t kc = 256, n = 2048;
  std::vector<uint16_t> src16(k->nr * n, 0x3f80);
  std::vector<float> src32(k->nr * n, 1.0f);
  const void* src = dtype == DType::kF32 ? static_cast<const void*>(src32.data()) : src16.data();
  Buffer out = make_buffer(kc * k->nr, 0.0f);
  for (auto _ : state) {
    k->pack_b[static_cast<int>(dtype)](src, static_cast<int64_t>(n), 1, 0, k->nr, 0, kc, out.get());
    benchmark::DoNotOptimize(out.get());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kc * k->nr));
  state.SetLabel(std::string(moegrad_isa_name(k->isa)) + " " + moegrad::dtype_name(dtype));
}

// Packing one grad_y micro-panel (MR gathered rows x kc).
void BM_pack_a(benchmark::State& state) {
  const GemmKernels* k = table(state.range(0), 0);
  if (k == nullptr) return state.SkipWithError("ISA not available on this CPU");
  const auto dtype = static_cast<DType>(state.range(1));
  const size_t kc = 256, n = 2048;
  std::vector<uint16_t> src16(64 * n, 0x3f80);
  std::vector<float> src32(64 * n, 1.0f);
  const void* src = dtype == DType::kF32 ? static_cast<const void*>(src32.data()) : src16.data();
  std::vector<int32_t> rows(k->mr);
  // Spaced and ascending, as PackAFn requires: a gather, not one block.
  for (size_t r = 0; r < k->mr; ++r) rows[r] = static_cast<int32_t>(r * 4);
  Buffer out = make_buffer(kc * k->mr, 0.0f);
  for (auto _ : state) {
    k->pack_a[static_cast<int>(dtype)](src, static_cast<int64_t>(n), 1, rows.data(), k->mr, 0, kc, out.get());
    benchmark::DoNotOptimize(out.get());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kc * k->mr));
  state.SetLabel(std::string(moegrad_isa_name(k->isa)) + " " + moegrad::dtype_name(dtype));
}

void isa_args(benchmark::internal::Benchmark* b, bool with_dtype) {
  for (int64_t isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512})
    for (int64_t d = 0; d < (with_dtype ? 3 : 1); ++d) b->Args({isa, d});
}

}  // namespace

BENCHMARK(BM_ukernel)
    ->ArgNames({"isa", "kc", "fast_bf16"})
    ->Args({MOEGRAD_ISA_SCALAR, 256, 0})
    ->Args({MOEGRAD_ISA_AVX2, 256, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 1})
    ->UseRealTime();
BENCHMARK(BM_rowvec_ukernel)
    ->ArgNames({"isa", "kc", "rows", "fast_bf16", "narrow"})
    ->Args({MOEGRAD_ISA_AVX2, 256, 16, 0, 0})
    ->Args({MOEGRAD_ISA_AVX2, 256, 8, 0, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 32, 0, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 24, 0, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 16, 0, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 8, 0, 0})
    ->Args({MOEGRAD_ISA_AVX512, 512, 32, 1, 0})  // the fast mode's block where the L1 holds it
    ->Args({MOEGRAD_ISA_AVX512, 256, 32, 1, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 24, 1, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 16, 1, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 8, 1, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 1, 0, 1})
    ->Args({MOEGRAD_ISA_AVX512, 256, 2, 0, 1})
    ->Args({MOEGRAD_ISA_AVX512, 256, 4, 0, 1})
    ->Args({MOEGRAD_ISA_AVX512, 256, 6, 0, 1})
    ->Args({MOEGRAD_ISA_AVX512, 256, 8, 0, 1})
    ->Args({MOEGRAD_ISA_AVX512, 256, 10, 0, 1})
    ->Args({MOEGRAD_ISA_AVX512, 256, 12, 0, 1})
    ->UseRealTime();
BENCHMARK(BM_rowvec_slot)
    ->ArgNames({"isa", "rows", "whole"})
    ->ArgsProduct({{MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}, {128, 137}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_pack_panel)
    ->ArgNames({"isa", "pad", "experts"})
    ->ArgsProduct({{MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}, {0, 16}, {1, 8, 64}})
    ->UseRealTime();
BENCHMARK(BM_rows_a_ukernel)
    ->ArgNames({"isa", "kc", "fast_bf16"})
    ->Args({MOEGRAD_ISA_AVX2, 256, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 0})
    ->Args({MOEGRAD_ISA_AVX512, 256, 1})
    ->UseRealTime();
BENCHMARK(BM_pack_b)->ArgNames({"isa", "dtype"})->Apply([](auto* b) { isa_args(b, true); })->UseRealTime();
BENCHMARK(BM_pack_a)->ArgNames({"isa", "dtype"})->Apply([](auto* b) { isa_args(b, true); })->UseRealTime();

BENCHMARK_MAIN();
