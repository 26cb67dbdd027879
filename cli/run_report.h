// What `moegrad run` measured, and its two renderings: a short human report
// and one JSON object (--json) with the same facts for scripts.
#pragma once

#include <cstdint>
#include <string>

#include "reference_check.h"
#include "run_problem.h"

namespace moegrad::cli {

struct RunReport {
  RunShape shape{};
  int64_t m = 0;
  int32_t threads = 0;
  std::string isa;

  int repetitions = 0;
  double fused_ms = 0;  // median of `repetitions` runs (execute phase)
  double plan_ms = 0;   // median planning time (get_workspace_size)
  double gflops = 0;    // 2*M*N*K / fused time
  uint64_t workspace_bytes = 0;
  uint64_t nonfused_bytes = 0;  // 4*M*K: the d_expanded_x the non-fused path materialises

  bool have_nonfused = false;
  std::string nonfused_skipped;  // why a build with the non-fused path did not run it (memory)
  double nonfused_ms = 0;
  double nonfused_max_abs_diff = 0;
  bool nonfused_identical = false;

  ReferenceCheck reference;

  int32_t other_threads = 0;  // thread count of the determinism re-run
  bool bitwise_identical = false;

  double inputs_s = 0;     // generating routing and data
  double reference_s = 0;  // the float64 check
  double total_s = 0;      // wall time of the whole command

  // The first check that failed, as `run` reports it; nullptr when all
  // passed. The non-fused path computes every element with the same chain
  // (SPEC 5), so any difference from it is a failure, not a tolerance.
  const char* failed_check() const {
    if (!bitwise_identical) return "grad_x differs between thread counts";
    if (!reference.within_bound) return "grad_x exceeds the SPEC 5 error bound";
    if (have_nonfused && !nonfused_identical) return "grad_x differs from the non-fused path's";
    return nullptr;
  }
  bool passed() const { return failed_check() == nullptr; }
};

void print_human(const RunReport& r);
void print_json(const RunReport& r);

}  // namespace moegrad::cli
