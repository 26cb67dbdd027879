// Which GEMM engine runs grad-x (plan/grad_x_plan.h decides for kAuto). Both
// compute every element with the same FMA chain, so the choice changes speed,
// never bits. Set from MOEGRAD_ENGINE=auto|packed|rowvec for benchmarks and
// tests.
#pragma once

namespace moegrad::plan {

enum class Engine {
  kAuto,
  kPacked,  // BLIS-style: grad_y rows x transposed weight panels (every ISA)
  kRowvec,  // weight strips x transposed grad_y panels (AVX-512, AVX2; contiguous layouts)
};

}  // namespace moegrad::plan
