#include "bench_options.h"

#include <moegrad/moegrad.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "dense_bytes.h"

// Where the oneDNN baseline's module is looked for (bench/CMakeLists.txt).
#ifdef MOEGRAD_BENCH_ONEDNN_MODULE
#define MOEGRAD_BENCH_ONEDNN_MODULE_HELP MOEGRAD_BENCH_ONEDNN_MODULE " (from this command)"
#else
#define MOEGRAD_BENCH_ONEDNN_MODULE_HELP "moegrad_bench_onednn.so, which this build lacks"
#endif

namespace moegrad::bench {

const char kBenchHelp[] =
    "Usage: moegrad bench [--shape NAME|batch,top_k,G,K,N]... [--dtype f32|f16|bf16]...\n"
    "                     [--threads N[,N...]] [--reps R] [--max-memory GIB] [--json]\n"
    "                     [--json-file PATH] [--op grad-x|forward|weight-grad]\n"
    "\n"
    "Measures, side by side in one run, for each shape, dtype and thread count:\n"
    "  fused            moegrad_grad_x (exact mode; time of the run phase only)\n"
    "  fused fast-bf16  the opt-in bf16 pair-dot-product mode (bf16, CPUs with AVX512_BF16)\n"
    "  nonfused         moegrad's own kernels: grouped GEMM into a full d_expanded_x [M, K],\n"
    "                   then the scatter-add (rows ascending); the whole call is timed\n"
    "                   (it plans and allocates its small workspace itself)\n"
    "  onednn-nonfused  oneDNN matmul per expert into d_expanded_x, then the same scatter-add\n"
    "                   (f32 and bf16; oneDNN 2.6 has no CPU f16 matmul here: null); loaded\n"
    "                   at run time: " MOEGRAD_BENCH_ONEDNN_MODULE_HELP "\n"
    "                   (null rows, and the reason, where it or libdnnl is missing)\n"
    "and, per thread count, fma-peak: the measured f32 FMA throughput of that many cores\n"
    "(the median of a loop's runs at the start and in every shape's timing rounds).\n"
    "A path forced below the CPU's best (MOEGRAD_ISA=avx2 on an AVX-512 CPU) is shown\n"
    "beside its own ISA's loop too, timed at the start; fma-peak stays the best loop's.\n"
    "Every path's grad_x is checked against the fused one (nonfused: bitwise; oneDNN and\n"
    "fast-bf16: max |diff| <= 1e-3 * max |grad_x|), and the fused one, exact and fast-bf16,\n"
    "across thread counts (bitwise) and, at the first, on 16 tokens against float64 sums\n"
    "within SPEC 5's bound (--op: moegrad's output, on 16 rows). A mismatch is a warning\n"
    "on stderr and FAIL or DIFFERS in the table; the JSON has null times for that path;\n"
    "the command exits 1 once everything is printed.\n"
    "\n"
    "Shapes (M = batch * top_k rows, random top-k routing sorted by expert, inputs in [-1, 1]):\n"
    "  zmoe          batch 2048,   top_k 4, G 60,  K 7168, N 2048  (f32 weight 3.5 GB)\n"
    "  large-token   batch 110592, top_k 2, G 60,  K 128,  N 256\n"
    "  fine-grained  batch 1024,   top_k 8, G 128, K 2048, N 768\n"
    "\n"
    "  --shape S      a name, a comma list of names, or batch,top_k,G,K,N; repeatable\n"
    "                 (default: all three)\n"
    "  --dtype D      f32, f16 or bf16, or a comma list; repeatable (default: all three)\n"
    "  --threads N    these thread counts, one or a comma list such as 1,2,16 (default:\n"
    "                 1 and the CPUs this process may use)\n"
    "  --reps R       timed rounds. Each path first runs alone (peak RSS, checks), then\n"
    "                 once more as a warm-up; then each round runs every path of the\n"
    "                 shape, of every dtype and thread count, once, interleaved and\n"
    "                 rotated, so drift in the machine's speed hits them alike (the\n"
    "                 ratios between dtypes and thread counts too). The median of the\n"
    "                 rounds is reported with min and max. Default: per shape, as many\n"
    "                 rounds as fit in about 30 s, judged by its warm-up round (the\n"
    "                 progress line shows its length), at least 5 and at most 25\n"
    "                 (on the project's 2-core Zen 4 VM zmoe gets 5, large-token 10,\n"
    "                 fine-grained 6, and the default run, 18 paths x 7 runs of zmoe\n"
    "                 at 240 GFLOP each and the two small shapes, takes ~6\n"
    "                 minutes). Memory: each path runs alone with its own dtype's\n"
    "                 inputs; the timing holds every dtype's at once, ~9 GB for zmoe\n"
    "                 with all three dtypes (--dtype f32 alone: ~4.5 GB); where\n"
    "                 the memory available is short of that (MemAvailable, or the\n"
    "                 memory cgroup's limit less its use where that is less), it\n"
    "                 times the dtypes in groups that fit, with a note\n"
    "  --max-memory G at most G GiB (a decimal number) for what the timing holds: the\n"
    "                 dtypes are then timed in groups that fit, as above (default and\n"
    "                 upper limit: 90% of the memory available); a dtype that needs\n"
    "                 more by itself is still timed, alone, with a note\n"
    "  --json         one JSON array of objects instead of the tables:\n"
    "                 {\"shape\", \"batch\", \"top_k\", \"experts\", \"k\", \"n\", \"dtype\",\n"
    "                  \"mode\": \"exact\"|\"fast-bf16\", \"threads\",\n"
    "                  \"path\": \"fused\"|\"nonfused\"|\"onednn-nonfused\"|\"fma-peak\",\n"
    "                  \"ms\" (median), \"ms_min\", \"ms_max\", \"gflops\" (2*M*N*K / ms),\n"
    "                  \"workspace_bytes\", \"peak_rss_bytes\"}\n"
    "                 null where a field does not apply or was not measured, and the\n"
    "                 times of a path whose grad_x failed its check; fma-peak rows\n"
    "                 carry only threads and gflops\n"
    "  --json-file P  also write that JSON array to the file P, whatever stdout shows, so\n"
    "                 the tables and the array come from one run. P is checked before\n"
    "                 any timing; the array is written to a temp file beside it and\n"
    "                 renamed to P when the run ends, so P is never left half written\n"
    "  --op OP        grad-x (default): the paths above. forward or weight-grad: the\n"
    "                 layer's other GEMMs instead, x [M, K] random in [-1, 1] with rows\n"
    "                 grouped as the routing's, f32 outputs:\n"
    "                   forward      y [M, N] = x [rows of g] @ weight[g]\n"
    "                   weight-grad  grad_weight [G, K, N] = x [rows of g]^T @ grad_y [rows of g]\n"
    "                 paths per dtype and thread count: moegrad (moegrad_grouped_matmul\n"
    "                 or moegrad_grouped_matmul_weight_grad, run phase only) and onednn\n"
    "                 (one oneDNN matmul per non-empty expert into the same output; the\n"
    "                 empty experts' grad_weight zeroed), and for bf16 where moegrad runs\n"
    "                 avx512 with AVX512_BF16, moegrad fast-bf16 (the fast bf16 mode).\n"
    "                 Checks: moegrad's outputs bitwise across thread counts, oneDNN's and\n"
    "                 fast-bf16's within 1e-3 * max |output| of the exact one.\n"
    "                 Each dtype is timed in its own rounds, with only its buffers held\n"
    "                 (no --max-memory); without --reps, the first dtype's warm-up round\n"
    "                 sets the rounds of all. Measured rows carry \"op\"; workspace_bytes\n"
    "                 is moegrad's workspace or oneDNN's scratchpad; peak_rss_bytes is null\n"
    "\n"
    "workspace_bytes: fused, what get_workspace_size reports; nonfused, 4*M*K (d_expanded_x)\n"
    "plus its workspace; oneDNN, 4*M*K plus its scratchpad. The tables show it beside 4*M*K.\n"
    "peak_rss_bytes: the process's peak resident memory during that path (inputs included):\n"
    "the high-water mark is reset by writing 5 to /proc/self/clear_refs before the path and\n"
    "VmHWM is read from /proc/self/status after it; null if the reset is not permitted. What\n"
    "earlier paths left resident and could not hand back (OpenMP's thread stacks) counts\n"
    "too: a later row can read a few MiB above an earlier one for that alone.\n"
    "\n"
    "oneDNN runs on OpenMP (libgomp) with its default, spinning wait policy, as users run it;\n"
    "on a machine shared with other jobs, and for tiny shapes (well under a millisecond)\n"
    "on any, its multi-thread times suffer from that, and\n"
    "OMP_WAIT_POLICY=passive shows what it does without the spinning.\n"
    "\n"
    "Progress goes to stderr. Exit status: 0 done, 1 runtime error or a failed check,\n"
    "2 usage error.\n";

namespace {

constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // SPEC §4
constexpr int kMaxThreads = MOEGRAD_MAX_THREADS;
constexpr int kMaxReps = 1000;
constexpr double kMaxMemoryGib = 1 << 20;  // 1 PiB: beyond any machine, short of overflowing uint64_t

const ShapeSpec kBuiltinShapes[] = {
    {"zmoe", 2048, 4, 60, 7168, 2048},
    {"large-token", 110592, 2, 60, 128, 256},
    {"fine-grained", 1024, 8, 128, 2048, 768},
};

[[noreturn]] void usage(const std::string& message) {
  throw UsageError("bench: " + message + " (see 'moegrad bench --help')");
}

// A decimal number of GiB in (0, kMaxMemoryGib], as bytes (at least 1).
std::optional<uint64_t> parse_gib(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v, std::chars_format::fixed);
  if (text.empty() || ec != std::errc() || ptr != end || !(v > 0) || v > kMaxMemoryGib) return std::nullopt;
  return std::max<uint64_t>(1, static_cast<uint64_t>(v * static_cast<double>(uint64_t{1} << 30)));
}

std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return parts;
    start = comma + 1;
  }
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A number among a --shape value's comma-separated parts means one custom
// shape (no name is a number), so "1,1,1,1" is told it lacks a number
// rather than that '1' is no name; otherwise the parts are names.
bool names_custom_shape(const std::vector<std::string_view>& parts) {
  return std::any_of(parts.begin(), parts.end(), all_digits);
}

void add_shapes(std::string_view value, std::vector<ShapeSpec>* shapes) {
  const std::vector<std::string_view> parts = split_commas(value);
  std::vector<ShapeSpec> found;
  try {
    if (names_custom_shape(parts)) {
      found.push_back(parse_shape(value));
    } else {
      for (const std::string_view part : parts) found.push_back(parse_shape(part));
    }
  } catch (const UsageError& e) {
    usage(e.what());
  }
  for (const ShapeSpec& s : found) {
    const bool seen = std::any_of(shapes->begin(), shapes->end(), [&](const ShapeSpec& t) { return t.name == s.name; });
    if (!seen) shapes->push_back(s);
  }
}

void add_dtypes(std::string_view value, std::vector<cli::FloatFormat>* dtypes) {
  for (const std::string_view part : split_commas(value)) {
    const std::optional<cli::FloatFormat> f = cli::format_from_name(part);
    if (!f) usage("unknown --dtype '" + std::string(part) + "' (f32, f16 or bf16)");
    if (std::find(dtypes->begin(), dtypes->end(), *f) == dtypes->end()) dtypes->push_back(*f);
  }
}

}  // namespace

std::optional<int64_t> parse_int(std::string_view text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < lo || v > hi) return std::nullopt;
  return v;
}

std::span<const ShapeSpec> builtin_shapes() { return kBuiltinShapes; }

ShapeSpec parse_shape(std::string_view value) {
  const std::vector<std::string_view> parts = split_commas(value);
  if (!names_custom_shape(parts)) {
    const auto it = std::find_if(std::begin(kBuiltinShapes), std::end(kBuiltinShapes),
                                 [&](const ShapeSpec& s) { return s.name == value; });
    if (it == std::end(kBuiltinShapes))
      throw UsageError("unknown --shape '" + std::string(value) +
                       "' (zmoe, large-token, fine-grained, or batch,top_k,G,K,N)");
    return *it;
  }
  if (parts.size() != 5) {
    throw UsageError("--shape " + std::string(value) + ": a custom shape needs 5 numbers batch,top_k,G,K,N, not " +
                     std::to_string(parts.size()));
  }
  static constexpr const char* kNames[] = {"batch", "top_k", "G", "K", "N"};
  int64_t d[5];
  for (int i = 0; i < 5; ++i) {
    const std::string_view part = parts[static_cast<size_t>(i)];
    const auto v = parse_int(part, 1, kMaxDim);
    if (!v) {
      const std::string what = parse_int(part, INT64_MIN, INT64_MAX) ? " is not in [1, " + std::to_string(kMaxDim) + "]"
                                                                      : " is not a decimal integer";
      throw UsageError("--shape " + std::string(value) + ": " + kNames[i] + " '" + std::string(part) + "'" + what);
    }
    d[i] = *v;
  }
  if (d[1] > d[2]) {
    throw UsageError("--shape " + std::string(value) + ": top_k " + std::to_string(d[1]) + " exceeds G " +
                     std::to_string(d[2]) + " (each token picks distinct experts)");
  }
  if (d[0] * d[1] > kMaxDim) {
    throw UsageError("--shape " + std::string(value) + ": M = batch * top_k = " + std::to_string(d[0] * d[1]) +
                     " exceeds " + std::to_string(kMaxDim));
  }
  // Every buffer a path allocates (f32 the widest) has a size in 64 bits;
  // whether it fits in memory is the runner's question.
  const int64_t m = d[0] * d[1];
  struct Buffer {
    const char* what;
    int64_t dims[3];  // 1 where the buffer has fewer
  };
  const Buffer buffers[] = {{"weight [G, K, N]", {d[2], d[3], d[4]}},
                            {"grad_y [M, N]", {m, d[4], 1}},
                            {"d_expanded_x [M, K]", {m, d[3], 1}},
                            {"grad_x [batch, K]", {d[0], d[3], 1}}};
  for (const Buffer& b : buffers) {
    uint64_t bytes = 0;
    if (!cli::dense_bytes({b.dims[0], b.dims[1], b.dims[2]}, sizeof(float), &bytes))
      throw UsageError("--shape " + std::string(value) + ": " + b.what + " in f32 needs more than 2^64 bytes");
  }
  std::string name;
  for (int i = 0; i < 5; ++i) {
    if (i > 0) name += ',';
    name += std::to_string(d[i]);
  }
  return {name, d[0], d[1], d[2], d[3], d[4]};
}

Options parse_options(std::span<char* const> args) {
  Options o;
  const auto takes_value = [](std::string_view name) {
    return name == "--threads" || name == "--shape" || name == "--dtype" || name == "--reps" ||
           name == "--max-memory" || name == "--json-file" || name == "--op";
  };
  // --help wins over every other error, wherever it stands, but not where it
  // is a flag's value as the loop below reads it: `--json-file -h` names a file.
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view s(args[i]);
    if (s == "--help" || s == "-h") {
      o.help = true;
      return o;
    }
    if (takes_value(s) && i + 1 < args.size() && std::string_view(args[i + 1]).substr(0, 2) != "--") ++i;
  }
  bool have_threads = false, have_reps = false, have_max_memory = false, have_op = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg(args[i]);
    if (arg.size() < 3 || arg.substr(0, 2) != "--") usage("unexpected argument '" + std::string(arg) + "'");
    const size_t eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    std::optional<std::string_view> inline_value;
    if (eq != std::string_view::npos) inline_value = arg.substr(eq + 1);

    if (name == "--json") {
      if (inline_value) usage("--json takes no value");
      if (o.json) usage("--json given twice");
      o.json = true;
      continue;
    }
    if (!takes_value(name)) usage("unknown flag '" + std::string(name) + "'");
    std::string_view value;
    if (inline_value) {
      value = *inline_value;
    } else {
      // A value may not start with "--": a forgotten value reads as such
      // rather than eating the next flag.
      if (i + 1 >= args.size() || std::string_view(args[i + 1]).substr(0, 2) == "--") {
        usage(std::string(name) + " needs a value");
      }
      value = args[++i];
    }
    if (value.empty()) usage(std::string(name) + " needs a value");

    if (name == "--threads") {
      if (have_threads) usage("--threads given twice");
      have_threads = true;
      // Ascending, each once: the speed-up lines and the bitwise check across
      // counts read the smallest first.
      for (const std::string_view part : split_commas(value)) {
        const auto v = parse_int(part, 1, kMaxThreads);
        if (!v)
          usage("--threads '" + std::string(value) + "' is not an integer, or a comma list of integers, in [1, " +
                std::to_string(kMaxThreads) + "]");
        o.threads.push_back(static_cast<int>(*v));
      }
      std::sort(o.threads.begin(), o.threads.end());
      o.threads.erase(std::unique(o.threads.begin(), o.threads.end()), o.threads.end());
    } else if (name == "--reps") {
      if (have_reps) usage("--reps given twice");
      have_reps = true;
      const auto v = parse_int(value, 1, kMaxReps);
      if (!v) usage("--reps '" + std::string(value) + "' is not an integer in [1, " + std::to_string(kMaxReps) + "]");
      o.reps = static_cast<int>(*v);  // parse_int bounds it
    } else if (name == "--max-memory") {
      if (have_max_memory) usage("--max-memory given twice");
      have_max_memory = true;
      o.max_memory_bytes = parse_gib(value);
      if (!o.max_memory_bytes) {
        usage("--max-memory '" + std::string(value) + "' is not a number of GiB in (0, " +
              std::to_string(static_cast<int64_t>(kMaxMemoryGib)) + "]");
      }
    } else if (name == "--json-file") {
      if (o.json_file) usage("--json-file given twice");
      o.json_file = std::string(value);
    } else if (name == "--op") {
      if (have_op) usage("--op given twice");
      have_op = true;
      const std::optional<BenchOp> op = op_from_name(value);
      if (!op) usage("unknown --op '" + std::string(value) + "' (grad-x, forward or weight-grad)");
      o.op = *op;
    } else if (name == "--shape") {
      add_shapes(value, &o.shapes);
    } else {
      add_dtypes(value, &o.dtypes);
    }
  }
  if (o.max_memory_bytes && o.op != BenchOp::kGradX) {
    usage(std::string("--max-memory is grad-x's: --op ") + op_name(o.op) + " times each dtype alone");
  }
  if (o.shapes.empty()) o.shapes.assign(std::begin(kBuiltinShapes), std::end(kBuiltinShapes));
  if (o.dtypes.empty()) o.dtypes = {cli::FloatFormat::kF32, cli::FloatFormat::kF16, cli::FloatFormat::kBF16};
  return o;  // threads: filled by the caller from the usable CPUs when empty
}

}  // namespace moegrad::bench
