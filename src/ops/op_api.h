// Planning and running any layer operator: the checks every entry point
// shares (NULL outputs, context, ISA, workspace, single use).
#pragma once

#include <cstddef>
#include <memory>
#include <new>

#include "api/context.h"
#include "common/error.h"
#include "ops/op.h"

namespace moegrad::ops {

// Resolves ctx (NULL: the default context) and its kernel tables, each
// setting read once (another thread may change the context meanwhile).
moegrad_status resolve_kernels(const moegrad_context** ctx, OpKernels* kernels);

// Hands a planned op to a new executor (fills the outputs, clears the error).
moegrad_status make_executor(std::unique_ptr<Op> op, size_t* workspace_bytes, moegrad_op_executor** executor);

// OpT::init(const Args*, const OpKernels&, int workers) validates and plans.
template <typename OpT, typename Args>
moegrad_status plan_op(const Args* args, const moegrad_context* ctx, size_t* workspace_bytes,
                       moegrad_op_executor** executor) {
  if (workspace_bytes == nullptr || executor == nullptr)
    return fail(MOEGRAD_STATUS_NULL_POINTER, "get_workspace_size: workspace_bytes or executor is NULL");
  *executor = nullptr;
  *workspace_bytes = 0;
  OpKernels k;
  if (auto s = resolve_kernels(&ctx, &k)) return s;
  std::unique_ptr<OpT> op(new (std::nothrow) OpT);
  if (!op) return fail(MOEGRAD_STATUS_OUT_OF_MEMORY, "cannot allocate an executor");
  if (auto s = op->init(args, k, ctx->num_threads)) return s;
  return make_executor(std::move(op), workspace_bytes, executor);
}

// Runs an executor planned for `kind`.
moegrad_status run_op(OpKind kind, void* workspace, size_t workspace_bytes, moegrad_op_executor* executor,
                      const moegrad_context* ctx);

// Plan, allocate the workspace, run, free.
template <typename OpT, typename Args>
moegrad_status run_one_shot(OpKind kind, const Args* args, const moegrad_context* ctx) {
  size_t bytes = 0;
  moegrad_op_executor* raw = nullptr;
  if (auto s = plan_op<OpT>(args, ctx, &bytes, &raw)) return s;
  std::unique_ptr<moegrad_op_executor> ex(raw);
  std::unique_ptr<std::byte[]> ws(new (std::nothrow) std::byte[bytes == 0 ? 1 : bytes]);
  if (!ws) return fail(MOEGRAD_STATUS_OUT_OF_MEMORY, "cannot allocate a %zu-byte workspace", bytes);
  return run_op(kind, ws.get(), bytes, ex.get(), ctx);
}

}  // namespace moegrad::ops
