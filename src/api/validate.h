// Shape, dtype, layout and attribute checks of SPEC §4 (1-5, 7, 9) that need
// no tensor contents. Content checks (§4.6, §4.8) run in the driver's routing
// phase, before grad_x is written.
#pragma once

#include "api/tensor_check.h"
#include "common/problem.h"
#include "moegrad/moegrad.h"

namespace moegrad {

// On success fills *out, and *spans with the five tensors' byte ranges; on
// failure returns the status and sets the message.
moegrad_status validate_grad_x_args(const moegrad_grad_x_args* args, GradXProblem* out, TensorSpans* spans);

}  // namespace moegrad
