#include "signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "atomic_file.h"
#include "cli_error.h"

namespace moegrad::cli {
namespace {

// Several threads can enter a handler at once: every worker reading a
// truncated mapping faults, and a second termination signal can reach
// another thread. The first handler to set this flag removes the temp
// files and ends the process, and never returns; any later one must
// neither end it first (before the temp files are gone and the message is
// written) nor return (a SIGBUS handler that returns faults again), so it
// waits for that end. (Only SIGKILL then ends a process whose first
// handler is stuck writing its message to a stderr nobody reads.) A
// lock-free atomic is async-signal-safe; since C++20 it starts clear.
std::atomic_flag g_ending;

[[noreturn]] void wait_for_the_first_handler() {
  for (;;) pause();
}

// Async-signal-safe only: unlink, sigaction, raise, sigprocmask, write,
// pause, _exit.
void on_termination(int sig) {
  if (g_ending.test_and_set()) wait_for_the_first_handler();
  remove_temp_files_on_signal();
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(sig, &default_action, nullptr);
  // Ends the process as the signal would, once unblocked. As PID 1 of a PID
  // namespace (a container without an init) the kernel drops a signal it
  // sends itself at its default action: exit with the shell's status then.
  raise(sig);
  sigset_t this_signal;
  sigemptyset(&this_signal);
  sigaddset(&this_signal, sig);
  sigprocmask(SIG_UNBLOCK, &this_signal, nullptr);
  _exit(128 + sig);
}

void on_bus_error(int) {
  if (g_ending.test_and_set()) wait_for_the_first_handler();
  static const char kMessage[] =
      "moegrad: error: bus error (SIGBUS) reading an input file: it was truncated or replaced while moegrad "
      "read it\n";
  remove_temp_files_on_signal();
  const ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  _exit(kExitFailure);
}

// Every handled signal stays blocked on a thread while one of the handlers
// runs there: a handler interrupted by another on its own thread, which
// would find the flag set and wait, would never end the process.
void install(int sig, void (*handler)(int), bool only_over_default) {
  struct sigaction now {};
  if (only_over_default &&
      (sigaction(sig, nullptr, &now) != 0 || (now.sa_flags & SA_SIGINFO) != 0 || now.sa_handler != SIG_DFL))
    return;
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  for (int other : kTerminationSignals) sigaddset(&action.sa_mask, other);
  sigaddset(&action.sa_mask, SIGBUS);
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
