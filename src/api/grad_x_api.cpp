// C entry points of grad-x: validation -> plan -> executor -> driver.
#include <cstddef>
#include <memory>
#include <new>

#include "api/context.h"
#include "api/executor.h"
#include "api/gemm_kernels_for_mode.h"
#include "api/run_checks.h"
#include "api/validate.h"
#include "common/error.h"
#include "driver/grad_x_driver.h"
#include "runtime/fp_env.h"

namespace moegrad {

moegrad_status resolve_context(const moegrad_context* ctx, const moegrad_context** out) {
  if (ctx != nullptr) {
    *out = ctx;
    return MOEGRAD_STATUS_SUCCESS;
  }
  return default_context(out);
}

moegrad_status plan_grad_x(const moegrad_grad_x_args* args, const moegrad_context* ctx, moegrad_executor* ex,
                           plan::RegionsFor regions) {
  if (auto s = resolve_context(ctx, &ctx)) return s;
  if (auto s = validate_grad_x_args(args, &ex->problem, &ex->tensors)) return s;
  // Each setting read once: another thread may change the context meanwhile.
  const moegrad_isa isa = ctx->isa;
  const bool fast_bf16 = ctx->fast_bf16;
  const int32_t threads = ctx->num_threads;
  const kernels::GemmKernels* k = kernels::gemm_kernels_for(isa);
  if (k == nullptr)
    return fail(MOEGRAD_STATUS_ISA_UNAVAILABLE, "context ISA %s is not available on this CPU", moegrad_isa_name(isa));
  if (auto s = gemm_kernels_for_mode(isa, fast_bf16, ex->problem.dtype, "", k, &k)) return s;
  // The cost model rounds doubles on the caller's thread: under the IEEE
  // default, so that the caller's rounding mode cannot change the plan, and
  // its inexact flag is not left in the caller's MXCSR (restored whole).
  const runtime::ScopedIeeeFpEnv fp_env;
  return plan::make_grad_x_plan(ex->problem, *k, threads, ctx->engine, ctx->caches, regions, &ex->plan);
}

}  // namespace moegrad

using moegrad::fail;

extern "C" {

moegrad_status moegrad_grad_x_get_workspace_size(const moegrad_grad_x_args* args, const moegrad_context* ctx,
                                                 size_t* workspace_bytes, moegrad_executor** executor) {
  if (workspace_bytes == nullptr || executor == nullptr)
    return fail(MOEGRAD_STATUS_NULL_POINTER, "get_workspace_size: workspace_bytes or executor is NULL");
  *executor = nullptr;
  *workspace_bytes = 0;
  std::unique_ptr<moegrad_executor> ex(new (std::nothrow) moegrad_executor);
  if (!ex) return fail(MOEGRAD_STATUS_OUT_OF_MEMORY, "cannot allocate an executor");
  if (auto s = moegrad::plan_grad_x(args, ctx, ex.get())) return s;
  *workspace_bytes = ex->plan.workspace_bytes;
  *executor = ex.release();
  moegrad::clear_last_error();
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status moegrad_grad_x(void* workspace, size_t workspace_bytes, moegrad_executor* executor,
                              const moegrad_context* ctx) {
  if (executor == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "moegrad_grad_x: executor is NULL");
  std::shared_ptr<moegrad::runtime::ThreadPool> pool;
  if (auto s = moegrad::begin_run("grad_x", workspace, workspace_bytes, executor->plan.workspace_bytes,
                                  executor->tensors, executor->used, &ctx, &pool))
    return s;
  if (auto s = moegrad::driver::run_grad_x(executor->problem, executor->plan, workspace, *pool, ctx->num_threads)) {
    executor->used = false;  // it wrote nothing (bad contents): fixed, they may be run again
    return s;
  }
  moegrad::clear_last_error();
  return MOEGRAD_STATUS_SUCCESS;
}

void moegrad_executor_destroy(moegrad_executor* executor) { delete executor; }

moegrad_status moegrad_grad_x_run(const moegrad_grad_x_args* args, const moegrad_context* ctx) {
  size_t bytes = 0;
  moegrad_executor* raw = nullptr;
  if (auto s = moegrad_grad_x_get_workspace_size(args, ctx, &bytes, &raw)) return s;
  std::unique_ptr<moegrad_executor, void (*)(moegrad_executor*)> ex(raw, moegrad_executor_destroy);
  std::unique_ptr<std::byte[]> ws(new (std::nothrow) std::byte[bytes == 0 ? 1 : bytes]);
  if (!ws) return fail(MOEGRAD_STATUS_OUT_OF_MEMORY, "cannot allocate a %zu-byte workspace", bytes);
  return moegrad_grad_x(ws.get(), bytes, ex.get(), ctx);
}

}  // extern "C"
