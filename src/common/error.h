// Failing with a status and a one-line message kept per thread.
#pragma once

#include <cstdarg>

#include "moegrad/moegrad.h"

namespace moegrad {

// Sets the thread's last-error message (printf-style) and returns status.
moegrad_status fail(moegrad_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// EXECUTOR_USED for `function` ("grad_x", "grouped_matmul"): its executor was
// run before, or is running on another thread.
moegrad_status fail_executor_used(const char* function);

// Clears the message at the start of a successful API call.
void clear_last_error();

// The calling thread's last message ("" when none): what
// moegrad_last_error_message returns.
const char* last_error_message();

}  // namespace moegrad
