// The layer operators' oneDNN baseline, as `moegrad bench --op` uses it: one
// dnnl::matmul per non-empty expert straight into the f32 output (forward:
// the expert's rows of y; weight grad: grad_weight[g], x's rows read
// transposed in place), which is how a framework without a grouped GEMM
// runs the layer. The work is done by moegrad_bench_onednn.so
// (onednn_layer_ops.cpp); this class forwards to it (onednn_loader.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench_problem.h"
#include "onednn_module.h"

namespace moegrad::bench {

class OnednnLayerOp {
 public:
  OnednnLayerOp();
  ~OnednnLayerOp();
  OnednnLayerOp(const OnednnLayerOp&) = delete;
  OnednnLayerOp& operator=(const OnednnLayerOp&) = delete;

  // Sets oneDNN's OpenMP threads and creates one matmul primitive per
  // distinct expert row count over p's buffers, which must outlive run().
  // Returns false with *why set when oneDNN is absent or has no matmul for
  // this dtype on this CPU; throws cli::CliError when it fails otherwise.
  bool prepare(const LayerOpProblem& p, int threads, std::string* why);

  // Writes p.out whole. Only after prepare() returned true; throws
  // cli::CliError if oneDNN fails.
  void run();

  uint64_t workspace_bytes() const;  // the largest primitive's scratchpad
  std::string implementation() const;

 private:
  std::unique_ptr<OnednnLayerBackend> backend_;  // made by the module
};

}  // namespace moegrad::bench
