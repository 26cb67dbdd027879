// `moegrad bench`: the fused operator side by side with the non-fused paths
// (moegrad's own kernels; oneDNN when built with it) and the machine's FMA
// peak, on the issue-3 shapes (SPEC §8). The CLI forwards to this.
#pragma once

namespace moegrad::bench {

// argv[0 .. argc-1] are the arguments after "bench" (no program name), e.g.
// {"--json", "--threads", "2"}. Writes the table (or, with --json, one JSON
// array) to stdout and progress to stderr. Returns the exit status: 0 done
// (a failed cross-check is a warning on stderr, not a failure), 1 a runtime
// error, 2 a usage error; every error is one "moegrad: error: ..." line on
// stderr. Never throws.
int run_bench_command(int argc, char** argv);

}  // namespace moegrad::bench
