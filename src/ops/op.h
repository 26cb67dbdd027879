// The common shape of a layer operator (moegrad_layer.h): validate + plan
// once (init), run once. The C entry points in op_api.cpp wrap every
// operator the same way, with the same checks and messages as grad-x.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "api/tensor_check.h"
#include "common/dtype.h"
#include "common/error.h"
#include "kernels/gemm_kernels.h"
#include "moegrad/moegrad_layer.h"
#include "runtime/thread_pool.h"

namespace moegrad::ops {

enum class OpKind { kMoeInitRouting, kGroupedMatmul, kGroupedMatmulWeightGrad, kMoeInitRoutingGrad };

// "moe_init_routing", ...
const char* op_name(OpKind kind);

// The kernel tables an operator may plan with, read once from its context:
// the ISA's table, and where the context asks for the fast bf16 mode, that
// mode's pair table (null where the ISA has none).
struct OpKernels {
  const kernels::GemmKernels* exact = nullptr;
  bool fast_bf16 = false;
  const kernels::GemmKernels* bf16_pairs = nullptr;
  moegrad_isa isa = MOEGRAD_ISA_AUTO;

  // The table a GEMM on `dtype` runs: the pair table for bf16 in the fast
  // mode, which changes the order and so is never replaced by the exact
  // table where the ISA lacks it (ISA_UNAVAILABLE, as for grad-x).
  moegrad_status gemm_for(DType dtype, const char* op, const kernels::GemmKernels** k) const {
    *k = exact;
    if (!fast_bf16 || dtype != DType::kBF16) return MOEGRAD_STATUS_SUCCESS;
    *k = bf16_pairs;
    if (*k != nullptr) return MOEGRAD_STATUS_SUCCESS;
    return fail(MOEGRAD_STATUS_ISA_UNAVAILABLE,
                "%s: fast bf16 mode needs AVX512_BF16 with ISA avx512 (or ISA scalar, its emulation); context ISA "
                "is %s",
                op, moegrad_isa_name(isa));
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
