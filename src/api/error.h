// Failing with a status and a one-line message kept per thread.
#pragma once

#include <cstdarg>

#include "moegrad/moegrad.h"

namespace moegrad {

// Sets the thread's last-error message (printf-style) and returns status.
moegrad_status fail(moegrad_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Clears the message at the start of a successful API call.
void clear_last_error();

}  // namespace moegrad
