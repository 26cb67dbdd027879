// What the command does when a signal ends it. Every signal whose default
// action ends the process and that the command does not otherwise handle
// (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2, SIGALRM, SIGVTALRM,
// SIGPROF, SIGXCPU from a CPU-time limit, SIGPIPE), where its disposition
// is still the default (not ignored, as under nohup, nor another handler a
// preloaded library installed), first removes the temp files of outputs
// not yet committed (cli/atomic_file.h), then ends the process as the
// signal would have (as PID 1 of a PID namespace, where the kernel drops
// that signal, by exiting with 128 + its number). SIGBUS, which reading a
// memory-mapped input raises when the file shrinks under it (np.save to the
// same path truncates it first), prints the one "moegrad: error:" line and
// exits 1 instead of dumping core, however many of its threads fault on the
// file at once.
// SIGXFSZ is ignored, so a write past `ulimit -f` is an ordinary failed
// write (EFBIG): one error line, no temp file.
#pragma once

#include <signal.h>

namespace moegrad::cli {

// The signals whose handler removes the temp files.
inline constexpr int kTerminationSignals[] = {SIGINT,    SIGTERM, SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2,
                                              SIGALRM,   SIGVTALRM, SIGPROF, SIGXCPU, SIGPIPE};

void install_signal_handlers();

}  // namespace moegrad::cli
