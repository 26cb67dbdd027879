#include "ops_runner.h"

#include <memory>

namespace mgh {

const char* layer_op_name(LayerOp op) {
  switch (op) {
    case LayerOp::kMoeInitRouting: return "moe_init_routing";
    case LayerOp::kGroupedMatmul: return "grouped_matmul";
    case LayerOp::kGroupedMatmulWeightGrad: return "grouped_matmul_weight_grad";
    case LayerOp::kMoeInitRoutingGrad: return "moe_init_routing_grad";
    case LayerOp::kCount: break;
  }
  return "?";
}

const char* op_misuse_name(OpMisuse m) {
  switch (m) {
    case OpMisuse::kNone: return "none";
    case OpMisuse::kNullSizeOut: return "null-size-out";
    case OpMisuse::kNullExecutorOut: return "null-executor-out";
    case OpMisuse::kNullExecutor: return "null-executor";
    case OpMisuse::kWorkspaceTooSmall: return "workspace-too-small";
    case OpMisuse::kNullWorkspace: return "null-workspace";
    case OpMisuse::kWorkspaceOverlap: return "workspace-overlap";
    case OpMisuse::kRunTwice: return "run-twice";
    case OpMisuse::kWrongKind: return "wrong-kind";
    case OpMisuse::kCount: break;
  }
  return "?";
}

namespace {

using RunFn = moegrad_status (*)(void*, size_t, moegrad_op_executor*, const moegrad_context*);

RunFn run_function(LayerOp op) {
  switch (op) {
    case LayerOp::kMoeInitRouting: return moegrad_moe_init_routing;
    case LayerOp::kGroupedMatmul: return moegrad_grouped_matmul;
    case LayerOp::kGroupedMatmulWeightGrad: return moegrad_grouped_matmul_weight_grad;
    default: return moegrad_moe_init_routing_grad;
  }
}

// The C entry points of the operator that takes Args.
template <typename Args>
struct OpApi;
template <>
struct OpApi<moegrad_moe_init_routing_args> {
  static constexpr LayerOp op = LayerOp::kMoeInitRouting;
  static constexpr auto plan = moegrad_moe_init_routing_get_workspace_size;
  static constexpr auto one_shot = moegrad_moe_init_routing_run;
};
template <>
struct OpApi<moegrad_grouped_matmul_args> {
  static constexpr LayerOp op = LayerOp::kGroupedMatmul;
  static constexpr auto plan = moegrad_grouped_matmul_get_workspace_size;
  static constexpr auto one_shot = moegrad_grouped_matmul_run;
};
template <>
struct OpApi<moegrad_grouped_matmul_weight_grad_args> {
  static constexpr LayerOp op = LayerOp::kGroupedMatmulWeightGrad;
  static constexpr auto plan = moegrad_grouped_matmul_weight_grad_get_workspace_size;
  static constexpr auto one_shot = moegrad_grouped_matmul_weight_grad_run;
};
template <>
struct OpApi<moegrad_moe_init_routing_grad_args> {
  static constexpr LayerOp op = LayerOp::kMoeInitRoutingGrad;
  static constexpr auto plan = moegrad_moe_init_routing_grad_get_workspace_size;
  static constexpr auto one_shot = moegrad_moe_init_routing_grad_run;
};

void* overlapping_workspace(const OpRunOptions& opt, size_t bytes) {
  switch (opt.overlap_placement) {
    case OverlapPlacement::kLastOnFirst: return reinterpret_cast<void*>(opt.overlap_first - (bytes - 1));
    case OverlapPlacement::kFirstOnLast: return reinterpret_cast<void*>(opt.overlap_last);
    default: return reinterpret_cast<void*>(opt.overlap_first);
  }
}

}  // namespace

template <typename Args>
OpRunResult run_layer_op(const Args* args, const OpRunOptions& opt) {
  using Api = OpApi<Args>;
  OpRunResult r;
  auto failed = [&](moegrad_status s, const char* phase) {
    r.status = s;
    r.phase = phase;
    r.message = moegrad_last_error_message();
    return r;
  };
  if (opt.one_shot) {
    if (const moegrad_status s = Api::one_shot(args, opt.plan_ctx)) return failed(s, "one-shot");
    r.phase = "one-shot";
    return r;
  }
  size_t bytes = 12345;  // a failure must set it to 0, a success to the size
  moegrad_op_executor* raw = nullptr;
  moegrad_status s;
  switch (opt.misuse) {
    case OpMisuse::kNullSizeOut: s = Api::plan(args, opt.plan_ctx, nullptr, &raw); break;
    case OpMisuse::kNullExecutorOut: s = Api::plan(args, opt.plan_ctx, &bytes, nullptr); break;
    default: s = Api::plan(args, opt.plan_ctx, &bytes, &raw); break;
  }
  const std::unique_ptr<moegrad_op_executor, decltype(&moegrad_op_executor_destroy)> ex(raw,
                                                                                        moegrad_op_executor_destroy);
  const bool null_out = opt.misuse == OpMisuse::kNullSizeOut || opt.misuse == OpMisuse::kNullExecutorOut;
  if (s != MOEGRAD_STATUS_SUCCESS) {
    if (raw != nullptr) return failed(MOEGRAD_STATUS_INTERNAL, "plan (executor returned with a failure)");
    // As grad-x's (moegrad.h): on failure *workspace_bytes is 0, once both
    // out-pointers are known not to be NULL.
    if (!null_out && bytes != 0)
      return failed(MOEGRAD_STATUS_INTERNAL, "plan (a failure left *workspace_bytes nonzero)");
    return failed(s, "plan");
  }
  if (null_out) {
    r.status = MOEGRAD_STATUS_INTERNAL;
    r.phase = "plan";
    r.message = "get_workspace_size accepted a NULL out-pointer";
    return r;
  }
  r.workspace_bytes = bytes;
  const size_t given = opt.misuse == OpMisuse::kWorkspaceTooSmall && bytes > 0 ? bytes - 1 : bytes;
  Workspace ws = make_workspace(given, opt.misalign, opt.ws_fill);
  void* ptr = ws.ptr;
  if (opt.misuse == OpMisuse::kNullWorkspace) ptr = nullptr;
  if (opt.misuse == OpMisuse::kWorkspaceOverlap && bytes > 0) ptr = overlapping_workspace(opt, bytes);
  moegrad_op_executor* run_ex = opt.misuse == OpMisuse::kNullExecutor ? nullptr : ex.get();
  if (opt.misuse == OpMisuse::kWrongKind) {
    const LayerOp other = static_cast<LayerOp>((static_cast<int>(Api::op) + 1) % static_cast<int>(LayerOp::kCount));
    r.wrong_kind_status = run_function(other)(ptr, given, run_ex, opt.run_ctx);
    if (opt.after_wrong_kind) r.after_wrong_kind = opt.after_wrong_kind();
  }
  s = run_function(Api::op)(ptr, given, run_ex, opt.run_ctx);
  if (s != MOEGRAD_STATUS_SUCCESS) return failed(s, "run");
  if (opt.misuse == OpMisuse::kRunTwice) {
    r.first_run_ok = true;
    s = run_function(Api::op)(ptr, given, run_ex, opt.run_ctx);
    if (s != MOEGRAD_STATUS_SUCCESS) return failed(s, "rerun");
    r.phase = "rerun";
  } else {
    r.phase = "run";
  }
  return r;
}

template OpRunResult run_layer_op(const moegrad_moe_init_routing_args*, const OpRunOptions&);
template OpRunResult run_layer_op(const moegrad_grouped_matmul_args*, const OpRunOptions&);
template OpRunResult run_layer_op(const moegrad_grouped_matmul_weight_grad_args*, const OpRunOptions&);
template OpRunResult run_layer_op(const moegrad_moe_init_routing_grad_args*, const OpRunOptions&);

}  // namespace mgh
