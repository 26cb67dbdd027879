// The non-fused baseline with oneDNN (a benchmark-only dependency): one
// dnnl::matmul per expert, d_expanded_x[rows of g] = grad_y[rows of g] x W[g]^T
// (W[g] is row-major [K, N], described to oneDNN as an [N, K] matrix with
// strides {1, N}; f32 output), then the same scatter-add as moegrad's
// non-fused path: grad_x zeroed, then rows added in ascending expanded order,
// column blocks in parallel (OpenMP, like oneDNN itself).
//
// Without oneDNN at build time (MOEGRAD_BENCH_HAVE_DNNL unset) prepare()
// always says why not, and `moegrad bench` prints null rows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench_problem.h"

namespace moegrad::bench {

class OnednnNonfused {
 public:
  // "oneDNN 2.6.3", or "" when not compiled in.
  static std::string version();

  OnednnNonfused();
  ~OnednnNonfused();
  OnednnNonfused(const OnednnNonfused&) = delete;
  OnednnNonfused& operator=(const OnednnNonfused&) = delete;

  // Sets oneDNN's OpenMP threads, creates one matmul primitive per distinct
  // expert row count (user-managed scratchpad), the memory objects, and the
  // [M, K] d_expanded_x. `p` must outlive run(). Returns false with *why set
  // when oneDNN is absent or has no matmul for this dtype on this CPU.
  bool prepare(const BenchProblem& p, int threads, std::string* why);

  // Both passes; grad_x [batch, K] f32 is overwritten. Only after prepare().
  void run(float* grad_x);

  // 4*M*K for d_expanded_x plus the largest primitive's scratchpad.
  uint64_t workspace_bytes() const;
  // oneDNN's implementation name, e.g. "brg:avx512_core".
  std::string implementation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moegrad::bench
