#include "run_report.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "ratio_text.h"

namespace moegrad::cli {
namespace {

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

double ratio(uint64_t a, uint64_t b) {
  return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
}

// JSON has no inf/NaN; null keeps the object parseable.
void json_number(const char* key, double v, bool last = false) {
  if (std::isfinite(v)) {
    std::printf("  \"%s\": %.9g%s\n", key, v, last ? "" : ",");
  } else {
    std::printf("  \"%s\": null%s\n", key, last ? "" : ",");
  }
}

void json_int(const char* key, int64_t v) { std::printf("  \"%s\": %" PRId64 ",\n", key, v); }
void json_uint(const char* key, uint64_t v) { std::printf("  \"%s\": %" PRIu64 ",\n", key, v); }
void json_bool(const char* key, bool v) {
  std::printf("  \"%s\": %s,\n", key, v ? "true" : "false");
}
void json_string(const char* key, const std::string& v) {
  std::printf("  \"%s\": \"%s\",\n", key, v.c_str());  // our strings need no escaping
}

}  // namespace

void print_human(const RunReport& r) {
  std::printf("moegrad run: fused MoE grad-x vs the non-fused path\n");
  std::printf("  shape       batch=%" PRId64 " top_k=%" PRId64 " experts=%" PRId64 " K=%" PRId64
              " N=%" PRId64 " M=%" PRId64 "\n",
              r.shape.batch, r.shape.top_k, r.shape.experts, r.shape.k, r.shape.n, r.m);
  std::printf("  setup       dtype=%s threads=%d isa=%s seed=%" PRIu64 "\n",
              format_name(r.shape.format), r.threads, r.isa.c_str(), r.shape.seed);
  std::printf("  fused       %.3f ms (median of %d, plan %.3f ms)  %.1f GFLOP/s\n", r.fused_ms,
              r.repetitions, r.plan_ms, r.gflops);
  std::printf("  workspace   %" PRIu64 " B (%.2f MiB) vs %" PRIu64
              " B (%.2f MiB) for the non-fused d_expanded_x (4*M*K): %sx\n",
              r.workspace_bytes, mib(r.workspace_bytes), r.nonfused_bytes, mib(r.nonfused_bytes),
              ratio_text(ratio(r.workspace_bytes, r.nonfused_bytes)).c_str());
  if (r.have_nonfused) {
    std::printf("  non-fused   %.3f ms, max |fused - non-fused| = %.3g (bitwise equal: %s)\n",
                r.nonfused_ms, r.nonfused_max_abs_diff, r.nonfused_identical ? "yes" : "no");
  } else if (!r.nonfused_skipped.empty()) {
    std::printf("  non-fused   not run: %s\n", r.nonfused_skipped.c_str());
  } else {
    std::printf("  non-fused   not available in this build\n");
  }
  std::printf("  accuracy    %" PRId64
              " tokens vs float64: max |err| = %.3g, max err/bound = %.3g (%s)\n",
              r.reference.tokens, r.reference.max_abs_error, r.reference.max_error_over_bound,
              r.reference.within_bound ? "ok" : "EXCEEDS SPEC 5 BOUND");
  std::printf("  determinism bitwise identical across thread counts (%d vs %d): %s\n", r.threads,
              r.other_threads, r.bitwise_identical ? "yes" : "no");
  std::printf("  total       %.1f s wall (inputs %.1f s, float64 check %.1f s)\n", r.total_s,
              r.inputs_s, r.reference_s);
}

void print_json(const RunReport& r) {
  std::printf("{\n");
  json_int("batch", r.shape.batch);
  json_int("top_k", r.shape.top_k);
  json_int("experts", r.shape.experts);
  json_int("k", r.shape.k);
  json_int("n", r.shape.n);
  json_int("m", r.m);
  json_string("dtype", format_name(r.shape.format));
  json_int("threads", r.threads);
  json_string("isa", r.isa);
  json_uint("seed", r.shape.seed);
  json_int("repetitions", r.repetitions);
  json_number("time_ms", r.fused_ms);
  json_number("plan_ms", r.plan_ms);
  json_number("gflops", r.gflops);
  json_uint("workspace_bytes", r.workspace_bytes);
  json_uint("nonfused_bytes", r.nonfused_bytes);
  json_number("workspace_ratio", ratio(r.workspace_bytes, r.nonfused_bytes));
  json_bool("nonfused_available", r.have_nonfused);
  if (!r.nonfused_skipped.empty()) json_string("nonfused_skipped", r.nonfused_skipped);
  if (r.have_nonfused) {
    json_number("nonfused_ms", r.nonfused_ms);
    json_number("nonfused_max_abs_diff", r.nonfused_max_abs_diff);
    json_bool("nonfused_identical", r.nonfused_identical);
  }
  json_int("reference_tokens", r.reference.tokens);
  json_number("max_abs_error", r.reference.max_abs_error);
  json_number("max_error_over_bound", r.reference.max_error_over_bound);
  json_bool("within_bound", r.reference.within_bound);
  json_int("other_threads", r.other_threads);
  json_bool("bitwise_identical", r.bitwise_identical);
  json_bool("passed", r.passed());
  json_number("inputs_s", r.inputs_s);
  json_number("reference_s", r.reference_s);
  json_number("total_s", r.total_s, /*last=*/true);
  std::printf("}\n");
}

}  // namespace moegrad::cli
