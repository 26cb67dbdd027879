// moegrad run: the main job. Builds a realistic random MoE layer, times the
// fused operator, checks it against the non-fused path, a float64 reference
// and a run with another thread count, and reports memory saved.
#include <moegrad/moegrad.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <moegrad/moegrad.hpp>
#include <optional>
#include <string>
#include <vector>

#include "aligned_buffer.h"
#include "cli_error.h"
#include "commands.h"
#include "flags.h"
#include "float_formats.h"
#include "gib_text.h"
#include "peak_rss.h"
#include "random_data.h"
#include "reference_check.h"
#include "run_problem.h"
#include "run_report.h"

// The non-fused baseline is an internal library entry point; guarded so the
// CLI still builds (and says so in its report) if a library lacks it.
#if __has_include("api/nonfused_grad_x.h")
#include "api/nonfused_grad_x.h"
#define MOEGRAD_CLI_HAVE_NONFUSED 1
#else
#define MOEGRAD_CLI_HAVE_NONFUSED 0
#endif

namespace moegrad::cli {
namespace {

constexpr char kHelp[] =
    "Usage: moegrad run [--batch 2048] [--top-k 4] [--experts 16] [--k 7168] [--n 2048]\n"
    "                   [--dtype f32|f16|bf16] [--threads N] [--seed S] [--json]\n"
    "\n"
    "Builds a random routing (each token picks top_k distinct experts; expanded\n"
    "rows sorted stably by expert) and random grad_y [M, N] and weight [G, K, N]\n"
    "uniform in [-1, 1], M = batch * top_k. Then:\n"
    "  - times the fused operator (one warm-up, median of several runs),\n"
    "  - runs the non-fused path (grouped GEMM into d_expanded_x [M, K], then\n"
    "    scatter-add) and compares the bytes (the same sums, so they must match);\n"
    "    where d_expanded_x does not fit in the memory available, says so,\n"
    "  - checks 16 tokens against a float64 reference with the SPEC 5 bound\n"
    "    (N + top_k) * (2^-24 * sum|terms| + 2^-150),\n"
    "  - re-runs with another thread count and compares the bytes,\n"
    "and reports time, GFLOP/s (2*M*N*K / time), workspace bytes versus the\n"
    "4*M*K bytes of d_expanded_x, accuracy and determinism.\n"
    "\n"
    "  --batch, --top-k, --experts, --k, --n   the shape (defaults above: the seed's\n"
    "                         zmoe layer with 16 experts instead of 60, so that making\n"
    "                         the 3.5 GB of random f32 weights does not dominate)\n"
    "  --dtype f32|f16|bf16   input element type (default f32)\n"
    "  --threads N            worker threads (default: MOEGRAD_NUM_THREADS or the CPUs\n"
    "                         this process may use)\n"
    "  --seed S               random seed (default 42)\n"
    "  --json                 print one JSON object instead of the text report\n"
    "\n"
    "A shape whose other buffers together exceed the memory available is refused\n"
    "before anything is allocated. The memory available: MemAvailable\n"
    "(/proc/meminfo), or the memory cgroup's limit less its use where that is\n"
    "less (a container's --memory).\n"
    "\n"
    "Exit status: 0 all checks passed; 1 a check failed (report still printed)\n"
    "or a runtime error; 2 usage error.\n";

constexpr FlagSpec kFlags[] = {
    {"--batch", true}, {"--top-k", true},   {"--experts", true}, {"--k", true},     {"--n", true},
    {"--dtype", true}, {"--threads", true}, {"--seed", true},    {"--json", false},
};

constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // SPEC 4

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

struct Timing {
  double plan_ms;
  double run_ms;
};

// One full two-phase call; the workspace grows if needed and is reused, so
// repetitions time the operator rather than the allocator.
Timing run_fused(const moegrad_grad_x_args& args, const moegrad::Context& ctx,
                 AlignedBuffer& workspace) {
  const Clock::time_point t0 = Clock::now();
  moegrad::GradXExecutor executor(args, ctx);
  const double plan_ms = ms_since(t0);
  if (workspace.size() < executor.workspace_bytes()) {
    check_workspace_fits(executor.workspace_bytes(), ctx.num_threads());
    workspace = AlignedBuffer(executor.workspace_bytes(), "the workspace");
  }
  const Clock::time_point t1 = Clock::now();
  executor.run(workspace.data(), executor.workspace_bytes(), ctx);
  return {plan_ms, ms_since(t1)};
}

// A warm-up (page faults, pool start-up), then the median of a few runs:
// more of them when each is short, fewer when the shape is large.
void time_fused(const RunProblem& problem, const GradXBuffer& out, const moegrad::Context& ctx,
                RunReport& r) {
  AlignedBuffer workspace;
  const moegrad_grad_x_args args = problem.args(out);
  const Timing warm = run_fused(args, ctx, workspace);
  r.workspace_bytes = workspace.size();
  r.repetitions = warm.run_ms < 200 ? 7 : (warm.run_ms < 500 ? 5 : 3);
  std::vector<double> run_ms, plan_ms;
  for (int i = 0; i < r.repetitions; ++i) {
    const Timing t = run_fused(args, ctx, workspace);
    run_ms.push_back(t.run_ms);
    plan_ms.push_back(t.plan_ms);
  }
  r.fused_ms = median(run_ms);
  r.plan_ms = median(plan_ms);
  const double flops = 2.0 * static_cast<double>(r.m) * static_cast<double>(r.shape.n) *
                       static_cast<double>(r.shape.k);
  r.gflops = flops / (r.fused_ms * 1e6);
}

// The same inputs on another thread count must give the same bytes (SPEC 5).
void check_thread_determinism(const RunProblem& problem, const GradXBuffer& fused, RunReport& r) {
  const GradXBuffer other = problem.make_grad_x("grad_x (determinism run)");
  moegrad::Context ctx;
  r.other_threads = r.threads > 1 ? 1 : 2;
  ctx.set_num_threads(r.other_threads);
  AlignedBuffer workspace;
  run_fused(problem.args(other), ctx, workspace);
  r.bitwise_identical = std::memcmp(other.values(), fused.values(), problem.grad_x_bytes()) == 0;
}

// The baseline the fused operator replaces: full d_expanded_x, then scatter-add.
void compare_nonfused(const RunProblem& problem, const GradXBuffer& fused,
                      const moegrad::Context& ctx, RunReport& r) {
#if MOEGRAD_CLI_HAVE_NONFUSED
  // The shapes where fusion matters most are those whose d_expanded_x does
  // not fit: the report then says so instead of being lost to an error.
  const uint64_t need = r.nonfused_bytes + problem.grad_x_bytes();  // each checked, far below 2^63
  if (const std::optional<bench::AvailableMemory> available = bench::memory_short_of(need)) {
    const auto [need_text, available_text] = gib_texts(need, available->bytes);
    r.nonfused_skipped = "its d_expanded_x (4*M*K) and grad_x need " + need_text + ", " + available_text +
                         " are available (" + available->source() + ")";
    return;
  }
  AlignedBuffer d_expanded_x;
  std::optional<GradXBuffer> nonfused_buffer;
  try {
    d_expanded_x = AlignedBuffer(r.nonfused_bytes, "d_expanded_x (non-fused path)");
    nonfused_buffer.emplace(problem.make_grad_x("grad_x (non-fused path)"));
  } catch (const CliError& e) {  // AlignedBuffer's "out of memory"
    r.nonfused_skipped = e.what();
    return;
  }
  const GradXBuffer& nonfused = *nonfused_buffer;
  const Clock::time_point t0 = Clock::now();
  moegrad::check(moegrad::nonfused_grad_x(problem.args(nonfused), ctx.get(), d_expanded_x.as<float>()));
  r.nonfused_ms = ms_since(t0);
  r.have_nonfused = true;
  const uint64_t bytes = problem.grad_x_bytes();
  r.nonfused_identical = std::memcmp(nonfused.values(), fused.values(), bytes) == 0;
  for (uint64_t i = 0; i < bytes / sizeof(float); ++i) {
    const double d = std::fabs(static_cast<double>(fused.values()[i]) - nonfused.values()[i]);
    r.nonfused_max_abs_diff = std::max(r.nonfused_max_abs_diff,
                                       std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
  }
#else
  (void)problem, (void)fused, (void)ctx, (void)r;
#endif
}

}  // namespace

int cmd_run(std::span<char* const> args) {
  const Clock::time_point start = Clock::now();
  const ParsedFlags flags = ParsedFlags::parse("run", kFlags, args);
  if (flags.help()) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  const std::string dtype = flags.choice("--dtype", {"f32", "f16", "bf16"}, "f32");
  const RunShape shape{
      flags.integer("--batch", 1, kMaxDim).value_or(2048),
      flags.integer("--top-k", 1, kMaxDim).value_or(4),
      flags.integer("--experts", 1, kMaxDim).value_or(16),
      flags.integer("--k", 1, kMaxDim).value_or(7168),
      flags.integer("--n", 1, kMaxDim).value_or(2048),
      dtype == "f16" ? FloatFormat::kF16
                     : (dtype == "bf16" ? FloatFormat::kBF16 : FloatFormat::kF32),
      static_cast<uint64_t>(
          flags.integer("--seed", 0, std::numeric_limits<int64_t>::max()).value_or(kDefaultSeed)),
  };
  const std::optional<int64_t> threads = flags.integer("--threads", 1, MOEGRAD_MAX_THREADS);
  const bool json = flags.has("--json");
  if (shape.top_k > shape.experts) {
    usage_error("run: --top-k " + std::to_string(shape.top_k) + " exceeds --experts " +
                std::to_string(shape.experts) + " (each token picks distinct experts)");
  }

  // Its threads start at set_num_threads or its first run, after the inputs
  // are made (on every core): its count is known before.
  moegrad::Context ctx;
  check_run_shape(shape);
  RunReport r;
  r.shape = shape;
  const RunProblem problem(shape);
  r.m = problem.m();
  r.nonfused_bytes = static_cast<uint64_t>(r.m) * static_cast<uint64_t>(shape.k) * sizeof(float);
  const GradXBuffer fused = problem.make_grad_x("grad_x");
  r.inputs_s = ms_since(start) / 1000.0;

  if (threads) ctx.set_num_threads(static_cast<int32_t>(*threads));
  r.threads = ctx.num_threads();
  r.isa = moegrad_isa_name(ctx.isa());

  time_fused(problem, fused, ctx, r);
  check_thread_determinism(problem, fused, r);
  compare_nonfused(problem, fused, ctx, r);
  const Clock::time_point reference_start = Clock::now();
  r.reference = check_against_float64(problem.reference(), fused.values(), kReferenceTokens);
  r.reference_s = ms_since(reference_start) / 1000.0;
  r.total_s = ms_since(start) / 1000.0;

  if (json) {
    print_json(r);
  } else {
    print_human(r);
  }
  if (const char* failed = r.failed_check()) data_error(std::string("run: check failed: ") + failed);
  return kExitOk;
}

}  // namespace moegrad::cli
