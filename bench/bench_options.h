// The command line of `moegrad bench`: strict parsing (unknown flags, repeated
// single-value flags, missing values and numbers with trailing junk are usage
// errors) into the list of shapes, dtypes and thread counts to measure.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench_problem.h"
#include "float_formats.h"

namespace moegrad::bench {

struct ShapeSpec {
  std::string name;  // "zmoe", or "batch,top_k,G,K,N" as given for a custom shape
  int64_t batch = 0, top_k = 0, experts = 0, k = 0, n = 0;
  int64_t m() const { return batch * top_k; }  // expanded rows; parse_options checks it fits int32
};

struct Options {
  bool help = false;
  bool json = false;
  std::optional<std::string> json_file;      // --json-file: the JSON array also goes there
  std::vector<ShapeSpec> shapes;             // default: the three issue-3 shapes
  std::vector<cli::FloatFormat> dtypes;      // default: f32, f16, bf16
  std::vector<int> threads;                  // default: 1 and the online CPUs (deduplicated)
  std::optional<int> reps;                   // --reps; default: per shape (default_reps)
  std::optional<uint64_t> max_memory_bytes;  // --max-memory: cap on what the timing holds
  BenchOp op = BenchOp::kGradX;              // --op
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws UsageError with a one-line message (no "moegrad: error:" prefix).
Options parse_options(std::span<char* const> args);

// The built-in shapes of issue 3.
std::span<const ShapeSpec> builtin_shapes();

// One shape as --shape gives it: a built-in name, or batch,top_k,G,K,N
// checked as `moegrad bench` checks it (each in range, top_k <= G, M in
// range, every buffer's size in 64 bits). Throws UsageError with the reason,
// without `moegrad bench`'s prefix.
ShapeSpec parse_shape(std::string_view value);

// A whole decimal number in [lo, hi] and nothing else (no sign, space or
// trailing junk); nullopt otherwise. ab_compare reads its counts with it too.
std::optional<int64_t> parse_int(std::string_view text, int64_t lo, int64_t hi);

extern const char kBenchHelp[];

}  // namespace moegrad::bench
