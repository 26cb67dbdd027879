// The rows `moegrad bench` measures and their two renderings: an aligned
// table per shape for people, and one JSON array for tools (issue 3 schema).
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench_options.h"

namespace moegrad::bench {

// One measurement; exactly the issue-3 JSON fields (nullopt prints null),
// plus `check` and `check_failed`, shown in the table only, and `op` for
// the layer operators' rows (`--op`), which alone have that JSON field.
struct Row {
  std::optional<std::string> op;    // "forward" | "weight-grad"; grad-x's rows have none
  std::optional<std::string> shape;
  std::optional<int64_t> batch, top_k, experts, k, n;
  std::optional<std::string> dtype;
  std::optional<std::string> mode;  // "exact" | "fast-bf16"
  int threads = 0;
  std::string path;                 // "fused" | "nonfused" | "onednn-nonfused" | "fma-peak";
                                    // --op: "moegrad" | "onednn"
  std::optional<double> ms, ms_min, ms_max, gflops;
  std::optional<uint64_t> workspace_bytes, peak_rss_bytes;
  std::string check;                // "ref", "bitwise", "rel 3e-08", "DIFFERS", ...
  // grad_x failed that check: the timing is of a wrong result, so the JSON
  // has null for it (the table still shows it), and the command exits 1.
  bool check_failed = false;
};

// The results of one shape, and the notes (skips, nulls, warnings) for its table.
struct ShapeReport {
  ShapeSpec shape;
  std::vector<Row> rows;
  std::vector<std::string> notes;
  int reps = 0;  // timed repetitions per path
};

struct MachineInfo {
  std::string cpu;     // /proc/cpuinfo "model name"
  std::string isa;     // moegrad's path on this machine
  std::string onednn;  // "oneDNN 2.6.3", or "no oneDNN: <why>"
  std::string fma_isa;  // the FMA loop's ISA ("avx512", "avx2", "none")
  std::vector<Row> fma_peak;  // one per thread count
  // The loop of moegrad's ISA where that is not fma_isa (a forced path),
  // one per thread count; empty otherwise, and for the scalar path, which
  // has no loop.
  std::vector<Row> own_fma_peak;
};

// "moegrad runs avx2, whose f32 FMA loop read ..." where own_fma_peak has
// rows: one line for the table's header and, with --json, for stderr.
std::optional<std::string> own_fma_loop_note(const MachineInfo& machine);

// `op` says what the run timed (BenchOp): the header's title and columns.
void print_header(std::FILE* out, const MachineInfo& machine, BenchOp op = BenchOp::kGradX);
void print_table(std::FILE* out, const ShapeReport& report, const MachineInfo& machine);
void print_json(std::FILE* out, const std::vector<Row>& rows);
// What print_json writes, as text (for --json-file).
std::string json_text(const std::vector<Row>& rows);
// The rows whose check failed, in order, each as "shape dtype t=N path"
// (plus the mode where it is not exact).
std::vector<std::string> failed_checks(const std::vector<ShapeReport>& reports);

}  // namespace moegrad::bench
