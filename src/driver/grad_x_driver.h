// Executes a plan: the routing phase, then the work items of the fused
// GEMM + scatter-add (see plan/grad_x_plan.h for the schedule and why it is
// deterministic), on a thread pool.
#pragma once

#include <cstddef>

#include "common/problem.h"
#include "plan/grad_x_plan.h"
#include "runtime/thread_pool.h"

namespace moegrad::driver {

// workspace: at least plan.workspace_bytes, any alignment. Returns a content
// error (grad_x untouched) or success.
moegrad_status run_grad_x(const GradXProblem& p, const plan::GradXPlan& plan, void* workspace,
                          runtime::ThreadPool& pool, int threads);

// The non-fused baseline with the same kernels: d_expanded_x[i, :] = grad_y[i, :] @ weight[g(i)]^T
// for every expanded row (a full [M, K] row-major buffer), then grad_x[b, :] += d_expanded_x[i, :]
// for ascending i. Same bits as run_grad_x.
moegrad_status run_nonfused_grad_x(const GradXProblem& p, const plan::GradXPlan& plan, void* workspace,
                                   runtime::ThreadPool& pool, int threads, float* d_expanded_x);

}  // namespace moegrad::driver
