// A user's static object whose destructor calls moegrad: exit() destroys
// the main thread's thread_local objects before it runs static destructors,
// so such a call must not touch a destroyed thread_local (the last-error
// message was a std::string: a use after free, which ASan reports). The
// checks run after main returns; a failed one ends the process with a
// non-zero status, which is what ctest sees.
#include <moegrad/moegrad.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

[[noreturn]] void fail_at_exit(int code, const char* what) {
  std::fprintf(stderr, "call_at_exit_test: %s (last error: \"%s\")\n", what, moegrad_last_error_message());
  _exit(code);
}

struct CallsMoegradAtExit {
  ~CallsMoegradAtExit() {
    moegrad_context* ctx = nullptr;
    if (moegrad_context_create(&ctx) != MOEGRAD_STATUS_SUCCESS) fail_at_exit(3, "context_create failed");
    if (moegrad_context_set_num_threads(ctx, -1) != MOEGRAD_STATUS_INVALID_ARGUMENT)
      fail_at_exit(4, "set_num_threads(-1) was not refused");
    if (std::strstr(moegrad_last_error_message(), "-1") == nullptr) fail_at_exit(5, "the message lost the value");
    if (moegrad_context_set_num_threads(ctx, 1) != MOEGRAD_STATUS_SUCCESS) fail_at_exit(6, "set_num_threads(1)");
    moegrad_context_destroy(ctx);
    std::fputs("call_at_exit_test: moegrad called from a static destructor after main\n", stdout);
  }
};

CallsMoegradAtExit g_calls_at_exit;  // destroyed after main returns

}  // namespace

int main() {
  // One call first, so the thread_local message exists (and is destroyed at exit).
  moegrad_context* ctx = nullptr;
  if (moegrad_context_set_num_threads(ctx, 1) != MOEGRAD_STATUS_NULL_POINTER) return 2;
  return 0;
}
