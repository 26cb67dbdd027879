#include "signals.h"

#include <signal.h>
#include <unistd.h>

#include "atomic_file.h"
#include "cli_error.h"

namespace moegrad::cli {
namespace {

// Async-signal-safe only: unlink, raise, write, _exit.
void on_termination(int sig) {
  remove_temp_files_on_signal();
  raise(sig);  // SA_RESETHAND restored the default action: delivered on return
}

void on_bus_error(int) {
  static const char kMessage[] =
      "moegrad: error: bus error (SIGBUS) reading an input file: it was truncated or replaced while moegrad "
      "read it\n";
  remove_temp_files_on_signal();
  const ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  _exit(kExitFailure);
}

void install(int sig, void (*handler)(int), bool only_over_default) {
  struct sigaction now {};
  if (only_over_default &&
      (sigaction(sig, nullptr, &now) != 0 || (now.sa_flags & SA_SIGINFO) != 0 || now.sa_handler != SIG_DFL))
    return;
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(sig, &action, nullptr);
}

}  // namespace

void install_signal_handlers() {
  for (int sig : kTerminationSignals) install(sig, on_termination, true);
  install(SIGBUS, on_bus_error, false);
  // A write past RLIMIT_FSIZE (`ulimit -f`) would raise SIGXFSZ, which ends
  // the process with no message and its temp file left behind. Ignored, the
  // write fails with EFBIG instead, which AtomicFile reports and cleans up
  // after like any other failed write.
  signal(SIGXFSZ, SIG_IGN);
}

}  // namespace moegrad::cli
