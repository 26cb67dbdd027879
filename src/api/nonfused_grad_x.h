// The non-fused baseline (grouped GEMM into a full d_expanded_x, then
// scatter-add), for `moegrad run` / `moegrad bench` comparisons. Not part of
// the public C API.
#pragma once

#include <cstddef>

#include "moegrad/moegrad.h"

namespace moegrad {

// Validates and plans like moegrad_grad_x_get_workspace_size, allocates its
// own workspace, fills d_expanded_x ([M, K] row-major, caller-allocated) and
// args.grad_x. ctx may be NULL (default context). *workspace_bytes (if
// given) receives the size of the workspace it allocated: the fused plan's
// tables, with packing regions for every thread of ctx.
moegrad_status nonfused_grad_x(const moegrad_grad_x_args& args, const moegrad_context* ctx, float* d_expanded_x,
                               size_t* workspace_bytes = nullptr);

}  // namespace moegrad
