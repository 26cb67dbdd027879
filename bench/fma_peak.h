// The machine's f32 FMA throughput: a loop of independent FMA chains that
// never touches memory, run on `threads` threads at once. The yardstick for
// "fraction of peak" in `moegrad bench`.
#pragma once

#include <cstdint>
#include <optional>

namespace moegrad::bench {

struct FmaPeak {
  const char* isa = "none";      // "avx512" or "avx2"
  std::optional<double> gflops;  // total over all threads; nullopt without AVX2/AVX-512
};

// One warm-up that also sizes the loop to ~100 ms, then the median of `reps`.
FmaPeak measure_fma_peak(int threads, int reps);

// The per-ISA loops (each in its own translation unit, compiled with exactly
// that ISA's flags). `iterations` rounds of independent FMAs acc = acc*a + b;
// returns the floating-point operations done and writes a result to *sink so
// the work cannot be dropped.
uint64_t fma_loop_avx512(uint64_t iterations, float a, float b, float* sink);
uint64_t fma_loop_avx2(uint64_t iterations, float a, float b, float* sink);

}  // namespace moegrad::bench
