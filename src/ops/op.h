// The common shape of a layer operator (moegrad_layer.h): validate + plan
// once (init), run once. The C entry points in op_api.cpp wrap every
// operator the same way, with the same checks and messages as grad-x.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "api/gemm_kernels_for_mode.h"
#include "api/tensor_check.h"
#include "common/dtype.h"
#include "kernels/gemm_kernels.h"
#include "moegrad/moegrad_layer.h"
#include "runtime/thread_pool.h"

namespace moegrad::ops {

enum class OpKind { kMoeInitRouting, kGroupedMatmul, kGroupedMatmulWeightGrad, kMoeInitRoutingGrad };

// "moe_init_routing", ...
const char* op_name(OpKind kind);

// What an operator plans its kernels from, read once from its context: the
// ISA, its table, and whether the context asks for the fast bf16 mode.
struct OpKernels {
  const kernels::GemmKernels* exact = nullptr;
  bool fast_bf16 = false;
  moegrad_isa isa = MOEGRAD_ISA_AUTO;

  // The table a GEMM on `dtype` runs (gemm_kernels_for_mode, as grad-x's).
  moegrad_status gemm_for(DType dtype, const char* op, const kernels::GemmKernels** k) const {
    return gemm_kernels_for_mode(isa, fast_bf16, dtype, op, exact, k);
  }
};

class Op {
 public:
  virtual ~Op() = default;
  virtual OpKind kind() const = 0;
  // workspace: at least workspace_bytes(), any alignment. Checks contents
  // (indices, group lists) before writing any output.
  virtual moegrad_status run(void* workspace, runtime::ThreadPool& pool, int threads) const = 0;

  size_t workspace_bytes() const { return workspace_bytes_; }
  int workers() const { return workers_; }
  // Every tensor of the call (inputs and outputs), which the workspace must
  // not overlap.
  const TensorSpans& tensors() const { return tensors_; }

 protected:
  size_t workspace_bytes_ = 0;
  TensorSpans tensors_;
  int workers_ = 1;  // planned (per-worker regions booked for this many)
};

}  // namespace moegrad::ops

// The opaque executor of moegrad_layer.h.
struct moegrad_op_executor {
  std::unique_ptr<moegrad::ops::Op> op;
  std::atomic<bool> used{false};  // single use, even across threads
};
