// What every run entry point (moegrad_grad_x and the layer operators' runs)
// checks and takes before it touches an output, so that all of them refuse
// the same mistakes with the same words.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "api/tensor_check.h"
#include "moegrad/moegrad.h"
#include "runtime/thread_pool.h"

namespace moegrad {

// The executor not run before, a workspace of at least `needed` bytes
// (present when needed > 0) sharing no byte with the call's tensors, the
// context resolved (*ctx; NULL: the default one) and its pool started
// (*pool); then the executor is claimed (`used`: single use, even across
// threads). `function` names the entry point in messages ("grad_x" for
// moegrad_grad_x). On a failure nothing is claimed.
moegrad_status begin_run(const char* function, void* workspace, size_t workspace_bytes, size_t needed,
                         const TensorSpans& tensors, std::atomic<bool>& used, const moegrad_context** ctx,
                         std::shared_ptr<runtime::ThreadPool>* pool);

}  // namespace moegrad
