// The machine's f32 FMA throughput: a loop of independent FMA chains that
// never touches memory, run on `threads` threads at once. The yardstick for
// "fraction of peak" in `moegrad bench`.
#pragma once

#include <moegrad/moegrad.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace moegrad::bench {

// One ISA's loop (below): `iterations` rounds, returns the flops done.
using FmaLoopFn = uint64_t (*)(uint64_t iterations, float a, float b, float* sink);

// The loop on one thread count, sized once (a warm-up run that lets the
// clocks ramp up) to about 100 ms a run. `moegrad bench` runs the CPU's
// best loop at the start and then in every shape's timing rounds,
// interleaved with the paths, so the peak it reports (the median of its
// runs at the start and its timed runs in the rounds, not their warm-up
// runs, as a path's median has none) comes from the same session as the
// paths' speeds. It is one figure
// per thread count (issue 3's schema has one fma-peak row each), so a shape
// timed while a shared host ran slower than the session's median reads a
// lower fraction. The loop of a path forced below the best runs at the
// start only.
class FmaLoop {
 public:
  // isa: MOEGRAD_ISA_AUTO for the CPU's best loop, or one ISA's loop
  // (none where the CPU lacks it, and none for MOEGRAD_ISA_SCALAR).
  explicit FmaLoop(int threads, moegrad_isa isa = MOEGRAD_ISA_AUTO);
  int threads() const { return threads_; }
  const char* isa() const { return isa_; }  // "avx512", "avx2" or "none"
  bool available() const { return fn_ != nullptr; }
  // One timed run (nothing without the loop: see the constructor); its
  // GFLOP/s is kept.
  void run();
  // run() in two steps: a timed run, whose GFLOP/s is kept only if
  // keep_last() follows (the warm-up of a shape's rounds is not).
  void measure();
  void keep_last();
  // The median GFLOP/s of the runs so far (total over all threads);
  // nullopt without the loop or before the first run.
  std::optional<double> peak_gflops() const;
  // The runs so far, and the median of those from run `first` on (one
  // shape's rounds: the host's speed in those minutes); nullopt if none.
  size_t runs() const { return gflops_.size(); }
  std::optional<double> median_since(size_t first) const;

 private:
  int threads_;
  const char* isa_ = "none";
  FmaLoopFn fn_ = nullptr;
  uint64_t iterations_ = 0;
  std::vector<double> gflops_;
  std::optional<double> last_gflops_;  // measured, not yet kept
};

// The per-ISA loops (each in its own translation unit, compiled with exactly
// that ISA's flags). `iterations` rounds of independent FMAs acc = acc*a + b;
// returns the floating-point operations done and writes a result to *sink so
// the work cannot be dropped.
uint64_t fma_loop_avx512(uint64_t iterations, float a, float b, float* sink);
uint64_t fma_loop_avx2(uint64_t iterations, float a, float b, float* sink);

}  // namespace moegrad::bench
