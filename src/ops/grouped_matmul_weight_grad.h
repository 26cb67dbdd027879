// grouped_matmul_weight_grad: d_weight[g] = x_g^T @ grad_y_g for the rows of
// each expert g (the seed's separate d_weight operator).
//
//   c[g, k, n] = sum_{i in rows of g, ascending} x[i, k] * grad_y[i, n]   (fp32 FMA chain from +0.0;
//                the fast bf16 mode: its pair chain, pairs from the expert's first row)
//   grad_weight[g, k, n] = c, or grad_weight + c when accumulating
//
// Engine operands: A = x seen as [K, M] (outer = x column stride, reduce = x
// row stride; the tile's `rows` are k indices), B = grad_y seen as [N, M];
// the reduction is the expert's row range [start_g, start_g + count_g).
// Schedule: items (expert, k block, n block) only — an element's reduction
// over rows is never split, so the bits do not depend on the thread count.
#pragma once

#include "common/problem.h"
#include "ops/gemm_scratch.h"
#include "ops/op.h"

namespace moegrad::ops {

class GroupedMatmulWeightGradOp final : public Op {
 public:
  OpKind kind() const override { return OpKind::kGroupedMatmulWeightGrad; }
  moegrad_status init(const moegrad_grouped_matmul_weight_grad_args* args, const OpKernels& k,
                      int workers);
  moegrad_status run(void* workspace, runtime::ThreadPool& pool, int threads) const override;

 private:
  void run_item(std::byte* base, const int64_t* group_start, int64_t item, int worker) const;

  DType dtype_ = DType::kF32, out_dtype_ = DType::kF32;
  int64_t M_ = 0, K_ = 0, N_ = 0, G_ = 0;
  const void* x_ = nullptr;
  int64_t x_row_ = 0, x_col_ = 0;
  const void* gy_ = nullptr;
  int64_t gy_row_ = 0, gy_col_ = 0;
  IndexView group_list_;
  int32_t group_list_type_ = 0;
  void* gw_ = nullptr;
  int64_t gw_g_ = 0, gw_k_ = 0, gw_n_ = 0;
  bool accumulate_ = false;
  bool direct_ = false;  // the kernel writes grad_weight itself (f32, overwrite, unit n stride)

  const kernels::GemmKernels* kernels_ = nullptr;
  TileBlocking blk_;
  int64_t k_blocks_ = 0, n_blocks_ = 0;
  int64_t n_runs_ = 1, n_per_run_ = 1;  // an item's n blocks: one of n_runs_ runs of n_per_run_
  BookedRegion group_start_;
  GemmWorkerSlots slots_;
};

}  // namespace moegrad::ops
