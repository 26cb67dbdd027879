#include "api/nonfused_grad_x.h"

#include <cstddef>
#include <memory>
#include <new>

#include "api/context.h"
#include "api/executor.h"
#include "common/error.h"
#include "driver/grad_x_driver.h"

namespace moegrad {

moegrad_status nonfused_grad_x(const moegrad_grad_x_args& args, const moegrad_context* ctx, float* d_expanded_x,
                               size_t* workspace_bytes) {
  if (auto s = resolve_context(ctx, &ctx)) return s;
  moegrad_executor ex;
  if (auto s = plan_grad_x(&args, ctx, &ex, plan::RegionsFor::kEveryWorker)) return s;
  if (d_expanded_x == nullptr && ex.problem.M > 0)
    return fail(MOEGRAD_STATUS_NULL_POINTER, "nonfused_grad_x: d_expanded_x is NULL");
  std::unique_ptr<std::byte[]> ws(new (std::nothrow) std::byte[ex.plan.workspace_bytes]);
  if (!ws) return fail(MOEGRAD_STATUS_OUT_OF_MEMORY, "cannot allocate a %zu-byte workspace", ex.plan.workspace_bytes);
  if (workspace_bytes != nullptr) *workspace_bytes = ex.plan.workspace_bytes;
  std::shared_ptr<runtime::ThreadPool> pool;
  if (auto s = ctx->pool(&pool)) return s;
  return driver::run_nonfused_grad_x(ex.problem, ex.plan, ws.get(), *pool, ctx->num_threads, d_expanded_x);
}

}  // namespace moegrad
