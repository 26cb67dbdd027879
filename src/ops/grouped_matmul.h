// grouped_matmul (forward): y[i, :] = x[i, :] @ weight[g(i)] for the rows
// i of each expert g, on the packed GEMM engine (driver/packed_gemm.h).
//
//   y[i, n] = sum_{k=0}^{K-1} x[i, k] * weight[g, k, n]   (fp32 FMA chain, ascending k;
//                                                          the fast bf16 mode: its pair chain from k = 0)
//
// Engine operands: A = x rows (outer = row stride, reduce = K stride), B =
// weight[g] seen as [N, K] (outer = n stride, reduce = k stride).
// Schedule: work items (column block, row tile of one expert), flattened
// once per run from the group list (CUTLASS's host-precomputed grouped
// schedule); each item owns its y tile, so the bits do not depend on threads.
#pragma once

#include "common/problem.h"
#include "ops/gemm_scratch.h"
#include "ops/op.h"

namespace moegrad::ops {

class GroupedMatmulOp final : public Op {
 public:
  OpKind kind() const override { return OpKind::kGroupedMatmul; }
  moegrad_status init(const moegrad_grouped_matmul_args* args, const OpKernels& k, int workers);
  moegrad_status run(void* workspace, runtime::ThreadPool& pool, int threads) const override;

 private:
  void run_tile(std::byte* base, const int64_t* group_start, const int64_t* tile_start, int64_t tiles, int64_t item,
                int worker) const;

  DType dtype_ = DType::kF32, out_dtype_ = DType::kF32;
  int64_t M_ = 0, K_ = 0, N_ = 0, G_ = 0;
  const void* x_ = nullptr;
  int64_t x_row_ = 0, x_col_ = 0;
  const void* w_ = nullptr;
  int64_t w_g_ = 0, w_k_ = 0, w_n_ = 0;
  IndexView group_list_;
  int32_t group_list_type_ = 0;
  void* y_ = nullptr;
  int64_t y_row_ = 0, y_col_ = 0;
  bool direct_ = false;  // the kernel writes y itself (f32, unit column stride)

  const kernels::GemmKernels* kernels_ = nullptr;
  TileBlocking blk_;
  int64_t col_blocks_ = 0;
  // Per worker: the key of the weight panel its b_pack holds (run_tile).
  BookedRegion group_start_, tile_start_, b_key_;
  GemmWorkerSlots slots_;
};

}  // namespace moegrad::ops
