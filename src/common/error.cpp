#include "common/error.h"

#include <cstdio>

namespace moegrad {
namespace {

// A plain array, not a std::string: it never allocates (so no bad_alloc
// escapes through the C API, on the out-of-memory path least of all), and
// it has no destructor, so a user's static destructor that calls moegrad
// after the thread's thread_locals were destroyed (exit() destroys them
// first) writes into live memory.
thread_local char t_last_error[1024];

}  // namespace

moegrad_status fail(moegrad_status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
  va_end(ap);
  return status;
}

moegrad_status fail_executor_used(const char* function) {
  return fail(MOEGRAD_STATUS_EXECUTOR_USED, "moegrad_%s: this executor was already run (or is running); plan again",
              function);
}

void clear_last_error() { t_last_error[0] = '\0'; }

const char* last_error_message() { return t_last_error; }

}  // namespace moegrad
