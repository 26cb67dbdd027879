// moe_init_routing_grad: the layer's scatter-add d_expanded_x -> d_x
// (MoeInitRoutingGrad), the second half of the non-fused path the fused
// grad-x replaces. (`moegrad run` and `bench` time the driver's own
// non-fused baseline, run_nonfused_grad_x, which adds in the same order.)
//
//   grad_x[b, k] = ((0 + d[i1, k]) + d[i2, k]) + ...   rows i1 < i2 < ... of token b
//
// Schedule: items (token chunk, column block); each item owns its grad_x
// block and adds its chunk's rows in ascending order (SPEC §5), from lists
// of each chunk's rows sorted once per run (so items do not each scan all M
// rows: with one column block, as at K <= 256, the scans grew with the
// thread count to many times the adds themselves).
#pragma once

#include "common/problem.h"
#include "ops/op.h"
#include "ops/workspace.h"

namespace moegrad::ops {

class MoeInitRoutingGradOp final : public Op {
 public:
  OpKind kind() const override { return OpKind::kMoeInitRoutingGrad; }
  moegrad_status init(const moegrad_moe_init_routing_grad_args* args, const OpKernels& k, int workers);
  moegrad_status run(void* workspace, runtime::ThreadPool& pool, int threads) const override;

 private:
  struct RowsByChunk {
    const int32_t* token_of_row;
    const int32_t* rows;  // every row with a token, grouped by token chunk, ascending within one
    const int32_t* ends;  // ends[c]: one past chunk c's last row in `rows` (its first: ends[c - 1], or 0)
  };
  void run_block(std::byte* base, const RowsByChunk& lists, int64_t item, int worker) const;

  GradXProblem problem_;  // grad_y = d_expanded_x; weight, group_list unused
  const kernels::GemmKernels* kernels_ = nullptr;
  size_t nc_ = 0;
  int64_t col_blocks_ = 0, tokens_per_chunk_ = 0, chunks_ = 0;
  BookedRegion token_of_row_, rows_by_chunk_, chunk_ends_, row_buffer_;
};

}  // namespace moegrad::ops
