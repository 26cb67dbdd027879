// The opaque moegrad_executor: a validated problem and its plan.
#pragma once

#include <atomic>

#include "api/tensor_check.h"
#include "common/problem.h"
#include "moegrad/moegrad.h"
#include "plan/grad_x_plan.h"

struct moegrad_executor {
  moegrad::GradXProblem problem;
  moegrad::plan::GradXPlan plan;
  moegrad::TensorSpans tensors;  // the workspace must lie apart from them
  std::atomic<bool> used{false};  // single use, even across threads
};

namespace moegrad {

// Validates args, plans for ctx (NULL: default context) into *ex.
moegrad_status plan_grad_x(const moegrad_grad_x_args* args, const moegrad_context* ctx, moegrad_executor* ex,
                           plan::RegionsFor regions = plan::RegionsFor::kFusedItems);

// Resolves a possibly-NULL context to the default one.
moegrad_status resolve_context(const moegrad_context* ctx, const moegrad_context** out);

}  // namespace moegrad
