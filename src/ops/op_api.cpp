// C entry points of the layer operators (moegrad_layer.h): every operator is
// planned, run and run-once the same way.
#include "ops/op_api.h"

#include <memory>

#include "api/executor.h"
#include "api/run_checks.h"
#include "ops/grouped_matmul.h"
#include "ops/grouped_matmul_weight_grad.h"
#include "ops/moe_init_routing.h"
#include "ops/moe_init_routing_grad.h"

namespace moegrad::ops {

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::kMoeInitRouting: return "moe_init_routing";
    case OpKind::kGroupedMatmul: return "grouped_matmul";
    case OpKind::kGroupedMatmulWeightGrad: return "grouped_matmul_weight_grad";
    case OpKind::kMoeInitRoutingGrad: return "moe_init_routing_grad";
  }
  return "?";
}

moegrad_status resolve_kernels(const moegrad_context** ctx, OpKernels* k) {
  if (auto s = resolve_context(*ctx, ctx)) return s;
  k->isa = (*ctx)->isa;
  k->fast_bf16 = (*ctx)->fast_bf16;
  k->exact = kernels::gemm_kernels_for(k->isa);
  if (k->exact == nullptr)
    return fail(MOEGRAD_STATUS_ISA_UNAVAILABLE, "context ISA %s is not available on this CPU",
                moegrad_isa_name(k->isa));
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status make_executor(std::unique_ptr<Op> op, size_t* workspace_bytes, moegrad_op_executor** executor) {
  std::unique_ptr<moegrad_op_executor> ex(new (std::nothrow) moegrad_op_executor);
  if (!ex) return fail(MOEGRAD_STATUS_OUT_OF_MEMORY, "cannot allocate an executor");
  *workspace_bytes = op->workspace_bytes();
  ex->op = std::move(op);
  *executor = ex.release();
  clear_last_error();
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status run_op(OpKind kind, void* workspace, size_t workspace_bytes, moegrad_op_executor* executor,
                      const moegrad_context* ctx) {
  const char* name = op_name(kind);
  if (executor == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "moegrad_%s: executor is NULL", name);
  if (executor->op->kind() != kind)
    return fail(MOEGRAD_STATUS_EXECUTOR_KIND, "moegrad_%s: the executor was planned for %s", name,
                op_name(executor->op->kind()));
  std::shared_ptr<runtime::ThreadPool> pool;
  if (auto s = begin_run(name, workspace, workspace_bytes, executor->op->workspace_bytes(), executor->op->tensors(),
                         executor->used, &ctx, &pool))
    return s;
  const int threads = std::min<int>(ctx->num_threads, executor->op->workers());
  if (auto s = executor->op->run(workspace, *pool, threads)) {
    executor->used = false;  // it wrote nothing (bad contents): fixed, they may be run again
    return s;
  }
  clear_last_error();
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad::ops

using moegrad::ops::OpKind;
using moegrad::ops::plan_op;
using moegrad::ops::run_one_shot;
using moegrad::ops::run_op;

extern "C" {

void moegrad_op_executor_destroy(moegrad_op_executor* executor) { delete executor; }

// moe_init_routing
moegrad_status moegrad_moe_init_routing_get_workspace_size(const moegrad_moe_init_routing_args* args,
                                                           const moegrad_context* ctx, size_t* workspace_bytes,
                                                           moegrad_op_executor** executor) {
  return plan_op<moegrad::ops::MoeInitRoutingOp>(args, ctx, workspace_bytes, executor);
}
moegrad_status moegrad_moe_init_routing(void* workspace, size_t workspace_bytes, moegrad_op_executor* executor,
                                        const moegrad_context* ctx) {
  return run_op(OpKind::kMoeInitRouting, workspace, workspace_bytes, executor, ctx);
}
moegrad_status moegrad_moe_init_routing_run(const moegrad_moe_init_routing_args* args, const moegrad_context* ctx) {
  return run_one_shot<moegrad::ops::MoeInitRoutingOp>(OpKind::kMoeInitRouting, args, ctx);
}
moegrad_status moegrad_moe_init_routing_max_rows(int64_t batch, int64_t top_k, int64_t num_experts,
                                                 int64_t active_num, int64_t capacity, int64_t* max_rows) {
  if (max_rows == nullptr) return moegrad::fail(MOEGRAD_STATUS_NULL_POINTER, "moe_init_routing_max_rows: max_rows is NULL");
  if (auto s = moegrad::ops::routing_max_rows(batch, top_k, num_experts, active_num, capacity,
                                              /*from_shapes=*/false, max_rows))
    return s;
  moegrad::clear_last_error();
  return MOEGRAD_STATUS_SUCCESS;
}

// grouped_matmul
moegrad_status moegrad_grouped_matmul_get_workspace_size(const moegrad_grouped_matmul_args* args,
                                                         const moegrad_context* ctx, size_t* workspace_bytes,
                                                         moegrad_op_executor** executor) {
  return plan_op<moegrad::ops::GroupedMatmulOp>(args, ctx, workspace_bytes, executor);
}
moegrad_status moegrad_grouped_matmul(void* workspace, size_t workspace_bytes, moegrad_op_executor* executor,
                                      const moegrad_context* ctx) {
  return run_op(OpKind::kGroupedMatmul, workspace, workspace_bytes, executor, ctx);
}
moegrad_status moegrad_grouped_matmul_run(const moegrad_grouped_matmul_args* args, const moegrad_context* ctx) {
  return run_one_shot<moegrad::ops::GroupedMatmulOp>(OpKind::kGroupedMatmul, args, ctx);
}

// grouped_matmul_weight_grad
moegrad_status moegrad_grouped_matmul_weight_grad_get_workspace_size(
    const moegrad_grouped_matmul_weight_grad_args* args, const moegrad_context* ctx, size_t* workspace_bytes,
    moegrad_op_executor** executor) {
  return plan_op<moegrad::ops::GroupedMatmulWeightGradOp>(args, ctx, workspace_bytes, executor);
}
moegrad_status moegrad_grouped_matmul_weight_grad(void* workspace, size_t workspace_bytes,
                                                  moegrad_op_executor* executor, const moegrad_context* ctx) {
  return run_op(OpKind::kGroupedMatmulWeightGrad, workspace, workspace_bytes, executor, ctx);
}
moegrad_status moegrad_grouped_matmul_weight_grad_run(const moegrad_grouped_matmul_weight_grad_args* args,
                                                      const moegrad_context* ctx) {
  return run_one_shot<moegrad::ops::GroupedMatmulWeightGradOp>(OpKind::kGroupedMatmulWeightGrad, args, ctx);
}

// moe_init_routing_grad
moegrad_status moegrad_moe_init_routing_grad_get_workspace_size(const moegrad_moe_init_routing_grad_args* args,
                                                                const moegrad_context* ctx, size_t* workspace_bytes,
                                                                moegrad_op_executor** executor) {
  return plan_op<moegrad::ops::MoeInitRoutingGradOp>(args, ctx, workspace_bytes, executor);
}
moegrad_status moegrad_moe_init_routing_grad(void* workspace, size_t workspace_bytes, moegrad_op_executor* executor,
                                             const moegrad_context* ctx) {
  return run_op(OpKind::kMoeInitRoutingGrad, workspace, workspace_bytes, executor, ctx);
}
moegrad_status moegrad_moe_init_routing_grad_run(const moegrad_moe_init_routing_grad_args* args,
                                                 const moegrad_context* ctx) {
  return run_one_shot<moegrad::ops::MoeInitRoutingGradOp>(OpKind::kMoeInitRoutingGrad, args, ctx);
}

}  // extern "C"
