// The measurements of `moegrad bench`: inputs per shape and dtype, then for
// each thread count the fused operator (exact, and fast-bf16 where the CPU
// has it), the non-fused path with moegrad's kernels and with oneDNN. Each
// first runs alone, sized (workspace, peak RSS) and cross-checked against
// the fused grad_x, with only its own dtype's inputs in memory; then the
// paths of every dtype and thread count are timed together, interleaved
// (one warm-up each, then rounds that run every path once), the median of
// the rounds reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_options.h"
#include "bench_report.h"
#include "fma_peak.h"

namespace moegrad::bench {

// One progress line on stderr: rewritten in place on a terminal, plain lines
// otherwise (logs, pipes).
class Progress {
 public:
  explicit Progress(int total);
  void step(const std::string& what);  // "[3/18] zmoe f32 t=1 onednn-nonfused..."
  void status(const std::string& what);  // a line that does not count as a step
  void warn(const std::string& message);  // "moegrad: warning: ..." on its own line
  void clear();  // erase the progress line (before the tables go to stdout)

 private:
  void show(const std::string& line);
  bool tty_;
  bool shown_ = false;
  int done_ = 0;
  int total_;
};

struct RunConfig {
  std::vector<cli::FloatFormat> dtypes;
  std::vector<int> threads;
  std::optional<int> reps;  // --reps; nullopt: default_reps of each shape's warm-up round
  bool fast_bf16 = false;  // the CPU runs moegrad's AVX512_BF16 fast mode
  std::optional<uint64_t> max_memory_bytes;  // --max-memory; the timing's budget is at most this
};

// nullopt if moegrad's fast bf16 mode runs its hardware kernel here,
// otherwise why not (it is then skipped, with a note).
std::optional<std::string> fast_bf16_unavailable_reason();

// How the timing splits a shape's dtypes when their buffers would not fit in
// memory together: consecutive groups, in order, each within `budget` bytes
// where possible (a dtype larger than the budget is a group of its own).
// bytes[i] is what timing dtype i holds; no budget (unknown): one group.
// Returns each group's first index.
std::vector<size_t> timing_groups(const std::vector<uint64_t>& bytes, std::optional<uint64_t> budget);

// The timed rounds of a shape when --reps is not given, from how long its
// warm-up round took: as many as fit in kRoundsBudgetSeconds, at least
// kMinDefaultReps and at most kMaxDefaultReps. A zmoe round takes half a
// minute or more, so it gets the minimum; the small shapes' rounds take
// seconds, so their medians can rest on more rounds for little time (on
// the 2-core Zen 4 VM: large-token 10 rounds, fine-grained 6, the whole
// default run 5.6 minutes). On a shared host whose other tenants slow a
// vCPU for minutes at a time, no number of rounds helps: read ratios
// within a run, and min beside median.
inline constexpr double kRoundsBudgetSeconds = 30;
inline constexpr int kMinDefaultReps = 5, kMaxDefaultReps = 25;
int default_reps(double warm_up_seconds);

// Steps run_shape reports to Progress for one shape.
int shape_steps(const RunConfig& config);

// fma_loops: run in the shape's timing rounds too (one per thread count).
ShapeReport run_shape(const ShapeSpec& shape, const RunConfig& config, const std::vector<FmaLoop*>& fma_loops,
                      Progress& progress);

}  // namespace moegrad::bench
