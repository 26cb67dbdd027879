// The non-fused baseline with oneDNN (a benchmark-only dependency): one
// dnnl::matmul per expert, d_expanded_x[rows of g] = grad_y[rows of g] x W[g]^T
// (W[g] is row-major [K, N], described to oneDNN as an [N, K] matrix with
// strides {1, N}; f32 output), then the same scatter-add as moegrad's
// non-fused path: grad_x zeroed, then rows added in ascending expanded order,
// column blocks in parallel (OpenMP, like oneDNN itself).
//
// The work is done by moegrad_bench_onednn.so (onednn_module.cpp), loaded
// the first time it is needed; this class finds and forwards to it. Without
// oneDNN at build time, or when the module or libdnnl cannot be loaded,
// prepare() says why not and `moegrad bench` prints null rows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench_problem.h"
#include "onednn_module.h"

namespace moegrad::bench {

class OnednnNonfused {
 public:
  // "oneDNN 2.6.3", or "" when the module is not available.
  static std::string version();
  // Why the module is not available ("" when it is).
  static std::string unavailable_reason();

  OnednnNonfused();
  ~OnednnNonfused();
  OnednnNonfused(const OnednnNonfused&) = delete;
  OnednnNonfused& operator=(const OnednnNonfused&) = delete;

  // Sets oneDNN's OpenMP threads, creates one matmul primitive per distinct
  // expert row count (user-managed scratchpad), the memory objects, and the
  // [M, K] d_expanded_x. `p` must outlive run(). Returns false with *why set
  // when oneDNN is absent or has no matmul for this dtype on this CPU;
  // throws cli::CliError when it fails otherwise (out of memory).
  bool prepare(const BenchProblem& p, int threads, std::string* why);

  // Both passes; grad_x [batch, K] f32 is overwritten. Only after prepare()
  // returned true; throws cli::CliError if oneDNN fails.
  void run(float* grad_x);

  // 4*M*K for d_expanded_x plus the largest primitive's scratchpad.
  uint64_t workspace_bytes() const;
  // oneDNN's implementation name, e.g. "brg:avx512_core".
  std::string implementation() const;

 private:
  std::unique_ptr<OnednnBackend> backend_;  // made by the module
};

}  // namespace moegrad::bench
