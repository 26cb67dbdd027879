// Calling a layer operator (moegrad_layer.h) the way an adversarial caller
// would: two phases with a workspace of exactly the reported size (at any
// misalignment, pre-filled with garbage), or the one-shot call; and the API
// misuses: NULL out-pointers, executor or workspace, a workspace one byte
// short or sharing bytes with a tensor of the call, a second run, and a run
// through another operator's function.
#pragma once

#include <moegrad/moegrad_layer.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runner.h"

namespace mgh {

enum class LayerOp : uint8_t { kMoeInitRouting, kGroupedMatmul, kGroupedMatmulWeightGrad, kMoeInitRoutingGrad, kCount };
const char* layer_op_name(LayerOp op);

enum class OpMisuse : uint8_t {
  kNone,
  kNullSizeOut,        // get_workspace_size's workspace_bytes out-pointer NULL
  kNullExecutorOut,    // its executor out-pointer NULL
  kNullExecutor,       // the run given a NULL executor
  kWorkspaceTooSmall,  // one byte less than reported
  kNullWorkspace,      // NULL workspace with the reported size
  kWorkspaceOverlap,   // a workspace that shares bytes with a tensor of the call
  kRunTwice,           // a second run of the same executor
  kWrongKind,          // first run through the next operator's run function
  kCount
};
const char* op_misuse_name(OpMisuse m);

// Where a kWorkspaceOverlap workspace meets the tensor bytes [first, last].
enum class OverlapPlacement : uint8_t {
  kLastOnFirst,   // the workspace's last byte is the tensor's first
  kFirstOnLast,   // its first byte is the tensor's last
  kFirstOnFirst,  // both start together
  kCount
};

struct OpRunOptions {
  const moegrad_context* plan_ctx = nullptr;  // NULL: the library's default context
  const moegrad_context* run_ctx = nullptr;
  bool one_shot = false;  // moegrad_*_run on plan_ctx (no misuse then)
  size_t misalign = 0;
  std::vector<uint8_t> ws_fill = {0xA5};
  OpMisuse misuse = OpMisuse::kNone;
  // kWorkspaceOverlap: the tensor's bytes. The workspace then points
  // outside any allocation of ours: a library that ran would write there,
  // which ASan reports.
  uintptr_t overlap_first = 0, overlap_last = 0;
  OverlapPlacement overlap_placement = OverlapPlacement::kLastOnFirst;
  // kWrongKind: called between the refused call and the real run; returns
  // "" or what it finds written.
  std::function<std::string()> after_wrong_kind;
};

struct OpRunResult : RunResult {
  moegrad_status wrong_kind_status = MOEGRAD_STATUS_SUCCESS;  // kWrongKind's first call
  std::string after_wrong_kind;                               // what the hook found
};

// Plan + run, or one shot (with the misuse, if any). args may be NULL.
// Executors are always destroyed.
template <typename Args>
OpRunResult run_layer_op(const Args* args, const OpRunOptions& opt);

extern template OpRunResult run_layer_op(const moegrad_moe_init_routing_args*, const OpRunOptions&);
extern template OpRunResult run_layer_op(const moegrad_grouped_matmul_args*, const OpRunOptions&);
extern template OpRunResult run_layer_op(const moegrad_grouped_matmul_weight_grad_args*, const OpRunOptions&);
extern template OpRunResult run_layer_op(const moegrad_moe_init_routing_grad_args*, const OpRunOptions&);

}  // namespace mgh
