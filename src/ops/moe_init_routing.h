// moe_init_routing (forward permute, MoeInitRouting): sorts the routing slots
// by expert, stably by original position p = b * top_k + j, applies the
// optional capacity and active_num limits, and gathers the token rows:
//
//   expanded_x[i, :] = x[p_i / top_k, :]   for kept rows i < M
//
// The sort is a counting sort (deterministic by construction, O(batch*top_k
// + G)) on the calling thread; the row copy runs on the pool.
#pragma once

#include "common/dtype.h"
#include "ops/op.h"
#include "ops/tensor_rules.h"
#include "ops/workspace.h"

namespace moegrad::ops {

// R = min(batch*top_k, active_num, G*capacity) over the limits that are set;
// validates the sizes and limits (statuses as the operator). from_shapes:
// the sizes are the operator's tensor shapes, which the messages then name.
moegrad_status routing_max_rows(int64_t batch, int64_t top_k, int64_t num_experts, int64_t active_num,
                                int64_t capacity, bool from_shapes, int64_t* max_rows);

class MoeInitRoutingOp final : public Op {
 public:
  OpKind kind() const override { return OpKind::kMoeInitRouting; }
  moegrad_status init(const moegrad_moe_init_routing_args* args, const OpKernels& k, int workers);
  moegrad_status run(void* workspace, runtime::ThreadPool& pool, int threads) const override;

 private:
  int64_t expert_at(int64_t p) const;
  moegrad_status sort_slots(int64_t* start, int64_t* cursor, int32_t* expert, int64_t* pos) const;
  void copy_rows(const int64_t* pos, int64_t M, int64_t i0, int64_t i1) const;

  DType dtype_ = DType::kF32;
  int64_t batch_ = 0, top_k_ = 0, K_ = 0, G_ = 0, R_ = 0;
  int64_t active_num_ = -1, capacity_ = -1;
  int32_t row_idx_type_ = 0;
  const std::byte* x_ = nullptr;
  int64_t x_row_ = 0, x_col_ = 0;
  const void* experts_ = nullptr;
  bool experts64_ = false;
  int64_t e_row_ = 0, e_col_ = 0;
  std::byte* ex_ = nullptr;
  int64_t ex_row_ = 0, ex_col_ = 0;
  IndexOut row_idx_, group_list_;
  int64_t* num_rows_ = nullptr;

  BookedRegion start_, cursor_, expert_, pos_;
};

}  // namespace moegrad::ops
