#include "api/run_checks.h"

#include "api/context.h"
#include "api/executor.h"
#include "common/error.h"

namespace moegrad {

moegrad_status begin_run(const char* function, void* workspace, size_t workspace_bytes, size_t needed,
                         const TensorSpans& tensors, std::atomic<bool>& used, const moegrad_context** ctx,
                         std::shared_ptr<runtime::ThreadPool>* pool) {
  if (used) return fail_executor_used(function);
  if (workspace_bytes < needed)
    return fail(MOEGRAD_STATUS_WORKSPACE_TOO_SMALL, "moegrad_%s: workspace_bytes=%zu < %zu reported by get_workspace_size",
                function, workspace_bytes, needed);
  if (workspace == nullptr && needed > 0)
    return fail(MOEGRAD_STATUS_NULL_POINTER, "moegrad_%s: workspace is NULL but %zu bytes are needed", function, needed);
  if (auto s = check_workspace_apart(function, workspace, needed, tensors)) return s;
  if (auto s = resolve_context(*ctx, ctx)) return s;
  if (auto s = (*ctx)->pool(pool)) return s;
  if (used.exchange(true)) return fail_executor_used(function);
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad
