#include "bench_runner.h"

#include <moegrad/moegrad.h>
#include <moegrad/moegrad.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>

#include "aligned_buffer.h"
#include "api/nonfused_grad_x.h"
#include "bench_problem.h"
#include "dl_tensor.h"
#include "grad_x_diff.h"
#include "interleaved_timing.h"
#include "onednn_nonfused.h"
#include "peak_rss.h"
#include "random_data.h"
#include "reference_check.h"
#include "routing.h"
#include "runner_support.h"
#include "stats.h"

namespace moegrad::bench {
namespace {

// One thread count's paths, their contexts and what they measured. Heap-held
// so the paths' closures, which point into it, stay valid while all thread
// counts are timed together.
struct ThreadPaths {
  explicit ThreadPaths(int n) : threads(n) {
    ctx.set_num_threads(n);
    fast_ctx.set_num_threads(n);
    fast_ctx.set_fast_bf16(true);
  }
  int threads;
  moegrad::Context ctx, fast_ctx;
  std::unique_ptr<OnednnNonfused> onednn_impl;
  std::string onednn_why, onednn_name;
  uint64_t fused_ws = 0, fast_ws = 0, nonfused_ws = 0, onednn_ws = 0;
  TimedPath fused, fast, nonfused, onednn;
  Row fused_row, fast_row, nf_row, dnn_row;
  std::optional<uint64_t> fused_rss, fast_rss, nonfused_rss, onednn_rss;
  bool fast_runs = false, onednn_runs = false;
};

bool is_tty(int fd) { return ::isatty(fd) == 1; }

}  // namespace

Progress::Progress(int total) : tty_(is_tty(STDERR_FILENO)), total_(total) {}

void Progress::show(const std::string& line) {
  if (tty_) {
    std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
    shown_ = true;
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

void Progress::step(const std::string& what) {
  ++done_;
  status(what);
}

void Progress::status(const std::string& what) {
  char counter[48];
  std::snprintf(counter, sizeof counter, "[%d/%d] ", done_, total_);
  show(counter + what + "...");
}

void Progress::warn(const std::string& message) {
  clear();
  std::fprintf(stderr, "moegrad: warning: %s\n", message.c_str());
  std::fflush(stderr);
}

void Progress::clear() {
  if (tty_ && shown_) {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
    shown_ = false;
  }
}

std::optional<std::string> fast_bf16_unavailable_reason() {
  moegrad::Context ctx;
  if (ctx.isa() != MOEGRAD_ISA_AVX512) {
    return std::string("fast-bf16 skipped: moegrad runs its ") + moegrad_isa_name(ctx.isa()) +
           " path here, and the mode's hardware kernel needs avx512 with AVX512_BF16";
  }
  ctx.set_fast_bf16(true);
  // Plan a 1x1x2 bf16 problem: planning picks the AVX512_BF16 kernel or fails.
  uint16_t gy[2] = {0x3f80, 0x3f80}, w[2] = {0x3f80, 0x3f80};
  int64_t idx[1] = {0}, gl[1] = {1};
  float gx[1] = {0};
  int64_t gy_shape[2] = {1, 2}, w_shape[3] = {1, 1, 2}, idx_shape[1] = {1}, gl_shape[1] = {1}, gx_shape[2] = {1, 1};
  const DLTensor gy_t = cli::make_dl_tensor(gy, {kDLBfloat, 16, 1}, gy_shape, 2);
  const DLTensor w_t = cli::make_dl_tensor(w, {kDLBfloat, 16, 1}, w_shape, 3);
  const DLTensor idx_t = cli::make_dl_tensor(idx, {kDLInt, 64, 1}, idx_shape, 1);
  const DLTensor gl_t = cli::make_dl_tensor(gl, {kDLInt, 64, 1}, gl_shape, 1);
  const DLTensor gx_t = cli::make_dl_tensor(gx, {kDLFloat, 32, 1}, gx_shape, 2);
  const moegrad_grad_x_args args{&gy_t, &w_t, &idx_t, &gl_t, &gx_t, 1, 1, MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL,
                                 MOEGRAD_GROUP_LIST_COUNT};
  size_t ws = 0;
  moegrad_executor* ex = nullptr;
  const moegrad_status s = moegrad_grad_x_get_workspace_size(&args, ctx.get(), &ws, &ex);
  moegrad_executor_destroy(ex);
  if (s == MOEGRAD_STATUS_ISA_UNAVAILABLE) return std::string("fast-bf16 skipped: this CPU lacks AVX512_BF16");
  moegrad::check(s);
  return std::nullopt;
}

std::vector<size_t> timing_groups(const std::vector<uint64_t>& bytes, std::optional<uint64_t> budget) {
  std::vector<size_t> starts;
  uint64_t held = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (starts.empty() || (budget && held + bytes[i] > *budget)) {
      starts.push_back(i);
      held = 0;
    }
    held += bytes[i];
  }
  return starts;
}

int shape_steps(const RunConfig& config) {
  int per_thread = 0;
  for (const cli::FloatFormat f : config.dtypes) {
    per_thread += 3 + (f == cli::FloatFormat::kBF16 && config.fast_bf16 ? 1 : 0);
  }
  return per_thread * static_cast<int>(config.threads.size());
}

namespace {

// One dtype of a shape: its inputs, outputs and paths. The buffers are
// allocated for the paths' runs alone, freed, and allocated again (the same
// values: fixed seeds) for the timing, where every dtype's are held at once;
// so each run alone, which measures peak RSS, holds its own dtype's inputs
// only, as a user's process would. Heap-held: the paths' closures point into
// it.
struct DtypeRun {
  cli::FloatFormat format = cli::FloatFormat::kF32;
  std::string dtype, label;
  cli::AlignedBuffer grad_y, weight;
  // The fused exact grad_x is the reference; `out` takes every other path.
  cli::AlignedBuffer ref, out;
  uint64_t buffer_bytes = 0;  // the four buffers above, as allocate_buffers made them
  int64_t gy_shape[2] = {}, w_shape[3] = {}, idx_shape[1] = {}, gl_shape[1] = {}, gx_shape[2] = {};
  DLTensor gy_t{}, w_t{}, idx_t{}, gl_t{}, ref_t{}, out_t{};
  moegrad_grad_x_args ref_args{}, out_args{};
  BenchProblem problem;
  // Shared by the thread counts' paths (never two runs at once): the fused
  // paths' workspace and moegrad's d_expanded_x.
  cli::AlignedBuffer ws;
  std::unique_ptr<cli::AlignedBuffer> d_expanded_x;
  std::vector<std::unique_ptr<ThreadPaths>> per_threads;
  std::vector<TimedPath*> timed;  // the paths that ran alone
};

// Allocates and fills d's inputs (and NaN-filled outputs), and points its
// tensors and arguments at them.
void allocate_buffers(DtypeRun& d, const ShapeSpec& shape, const cli::Routing& routing) {
  const auto M = static_cast<uint64_t>(shape.m()), N = static_cast<uint64_t>(shape.n),
             K = static_cast<uint64_t>(shape.k), G = static_cast<uint64_t>(shape.experts),
             B = static_cast<uint64_t>(shape.batch);
  const uint64_t esize = static_cast<uint64_t>(cli::format_bytes(d.format));
  d.grad_y = cli::AlignedBuffer(M * N * esize, "grad_y");
  d.weight = cli::AlignedBuffer(G * K * N * esize, "weight");
  cli::fill_uniform(d.grad_y.data(), d.format, M * N, cli::kDefaultSeed, cli::kGradYStream);
  cli::fill_uniform(d.weight.data(), d.format, G * K * N, cli::kDefaultSeed, cli::kWeightStream);
  d.ref = cli::AlignedBuffer(B * K * 4, "grad_x (fused)");
  d.out = cli::AlignedBuffer(B * K * 4, "grad_x (other paths)");
  fill_nan(d.ref);
  fill_nan(d.out);
  d.buffer_bytes = d.grad_y.size() + d.weight.size() + d.ref.size() + d.out.size();

  d.gy_shape[0] = shape.m();
  d.gy_shape[1] = shape.n;
  d.w_shape[0] = shape.experts;
  d.w_shape[1] = shape.k;
  d.w_shape[2] = shape.n;
  d.idx_shape[0] = shape.m();
  d.gl_shape[0] = shape.experts;
  d.gx_shape[0] = shape.batch;
  d.gx_shape[1] = shape.k;
  const DLDataType dl = cli::format_dl_dtype(d.format);
  d.gy_t = cli::make_dl_tensor(d.grad_y.data(), dl, d.gy_shape, 2);
  d.w_t = cli::make_dl_tensor(d.weight.data(), dl, d.w_shape, 3);
  d.idx_t = cli::make_dl_tensor(const_cast<int64_t*>(routing.expanded_row_idx.data()), {kDLInt, 64, 1},
                                d.idx_shape, 1);
  d.gl_t = cli::make_dl_tensor(const_cast<int64_t*>(routing.group_list.data()), {kDLInt, 64, 1}, d.gl_shape, 1);
  d.ref_t = cli::make_dl_tensor(d.ref.data(), {kDLFloat, 32, 1}, d.gx_shape, 2);
  d.out_t = cli::make_dl_tensor(d.out.data(), {kDLFloat, 32, 1}, d.gx_shape, 2);
  d.ref_args = moegrad_grad_x_args{&d.gy_t, &d.w_t, &d.idx_t, &d.gl_t, &d.ref_t, shape.batch, shape.top_k,
                                   MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL, MOEGRAD_GROUP_LIST_COUNT};
  d.out_args = d.ref_args;
  d.out_args.grad_x = &d.out_t;
  d.problem = BenchProblem{d.format, d.grad_y.data(), d.weight.data(), routing.expanded_row_idx.data(),
                           routing.group_list.data(), shape.batch, shape.top_k, shape.experts,
                           shape.k, shape.n, shape.m()};
}

void free_buffers(DtypeRun& d) {
  d.grad_y = cli::AlignedBuffer();
  d.weight = cli::AlignedBuffer();
  d.ref = cli::AlignedBuffer();
  d.out = cli::AlignedBuffer();
}

// The non-fused paths' intermediate, f32 [M, K].
uint64_t d_expanded_x_bytes(const ShapeSpec& shape) {
  return 4 * static_cast<uint64_t>(shape.m()) * static_cast<uint64_t>(shape.k);
}

// What timing d holds at once (after its runs alone): its buffers, and what
// its prepared paths allocate (d_expanded_x for moegrad's non-fused path and
// one for each oneDNN path).
uint64_t timing_bytes(const DtypeRun& d, const ShapeSpec& shape) {
  uint64_t intermediates = 1;
  for (const std::unique_ptr<ThreadPaths>& t : d.per_threads) intermediates += t->onednn_runs ? 1 : 0;
  return d.buffer_bytes + intermediates * d_expanded_x_bytes(shape);
}

// One run of the fused operator: planned (untimed), then timed.
double fused_run(const moegrad_grad_x_args& args, const moegrad::Context& c, uint64_t* ws_bytes,
                 cli::AlignedBuffer& ws) {
  moegrad::GradXExecutor ex(args, c);  // single-use: planned again each run, untimed
  *ws_bytes = ex.workspace_bytes();
  if (ws.data() == nullptr || ws.size() < ex.workspace_bytes())
    ws = cli::AlignedBuffer(ex.workspace_bytes(), "the workspace");
  const Clock::time_point t0 = Clock::now();
  ex.run(ws.data(), ex.workspace_bytes(), c);
  return ms_since(t0);
}

// Defines d's paths for every thread count, runs each alone (peak RSS and
// checks against the fused grad_x) and lists those that ran in d.timed.
void run_alone_and_check(DtypeRun& d, const ShapeSpec& shape, const RunConfig& config, ShapeReport* report,
                         Progress& progress) {
  const uint64_t grad_x_floats = static_cast<uint64_t>(shape.batch) * static_cast<uint64_t>(shape.k);
  const uint64_t intermediate_bytes = d_expanded_x_bytes(shape);
  // The fused grad_x of the first thread count, for the later ones. Touched
  // now, so no path's peak RSS counts it differently.
  const bool cross_threads = config.threads.size() > 1;
  const cli::AlignedBuffer first_ref(cross_threads ? grad_x_floats * 4 : 0, "grad_x (first thread count)");
  fill_nan(first_ref);
  uint64_t first_fast = 0;  // the fast mode's grad_x bits at the first thread count, hashed
  DtypeRun* dp = &d;

  for (const int threads : config.threads) {
    d.per_threads.push_back(std::make_unique<ThreadPaths>(threads));
    ThreadPaths& t = *d.per_threads.back();
    const std::string tag = d.label + " t=" + std::to_string(threads);
    const Row base = shape_row(shape, d.dtype, threads);
    // Agreement with the fused grad_x for a path that sums in another order.
    auto check_within_tolerance = [&](Row& row, const std::string& what) {
      const std::string failure = tolerance_check(d.out.as<float>(), d.ref.as<float>(), grad_x_floats, "grad_x", &row);
      if (!failure.empty()) progress.warn(tag + " " + what + ": grad_x differs from the fused one: " + failure);
    };

    // The paths. Their closures point into `t` and `d` (both heap-held) and
    // read d's buffers when they run, so they run again after the buffers
    // are allocated anew for the timing.
    ThreadPaths* s = &t;
    auto free_ws = [dp] { dp->ws = cli::AlignedBuffer(); };
    auto always = [] { return true; };
    t.fused = {always, [s, dp] { return fused_run(dp->ref_args, s->ctx, &s->fused_ws, dp->ws); }, free_ws, {}};
    t.fast = {always, [s, dp] { return fused_run(dp->out_args, s->fast_ctx, &s->fast_ws, dp->ws); }, free_ws, {}};
    t.nonfused = {
        [dp, intermediate_bytes] {
          if (!dp->d_expanded_x)
            dp->d_expanded_x =
                std::make_unique<cli::AlignedBuffer>(intermediate_bytes, "d_expanded_x (non-fused path)");
          return true;
        },
        [s, dp] {
          // The whole call: it plans and allocates its small workspace itself.
          const Clock::time_point t0 = Clock::now();
          moegrad::check(moegrad::nonfused_grad_x(dp->out_args, s->ctx.get(), dp->d_expanded_x->as<float>(),
                                                  &s->nonfused_ws));
          return ms_since(t0);
        },
        [dp] { dp->d_expanded_x.reset(); },
        {}};
    t.onednn = {
        [s, dp] {
          s->onednn_impl = std::make_unique<OnednnNonfused>();
          return s->onednn_impl->prepare(dp->problem, s->threads, &s->onednn_why);
        },
        [s, dp] {
          const Clock::time_point t0 = Clock::now();
          s->onednn_impl->run(dp->out.as<float>());
          return ms_since(t0);
        },
        [s] { s->onednn_impl.reset(); },
        {}};

    // Alone: peak RSS and the checks; `ran` reads what the path holds
    // before it is released. Returns whether the path ran.
    auto run_alone = [&](TimedPath& path, std::optional<uint64_t>* peak_rss,
                         const std::function<void()>& ran = [] {}) {
      const PeakRss rss;
      if (!path.prepare()) {
        path.release();
        return false;
      }
      path.run();
      *peak_rss = rss.peak();
      ran();
      path.release();
      return true;
    };

    // fused, exact: the reference for the other paths.
    progress.step(tag + " fused");
    t.fused_row = base;
    t.fused_row.path = "fused";
    run_alone(t.fused, &t.fused_rss);
    t.fused_row.check = "ref";
    if (threads == config.threads.front()) {
      const BenchProblem& p = d.problem;
      const cli::ReferenceCheck f64 = cli::check_against_float64(
          {p.grad_y, p.weight, p.format, p.expanded_row_idx, p.group_list, p.batch, p.top_k, p.experts, p.k, p.n, p.m},
          d.ref.as<float>(), cli::kReferenceTokens);
      const std::string failure = float64_check(f64.within_bound, f64.max_error_over_bound, "grad_x", &t.fused_row);
      if (!failure.empty()) progress.warn(tag + " fused: " + failure);
      if (cross_threads) std::memcpy(first_ref.data(), d.ref.data(), grad_x_floats * 4);
    } else if (std::memcmp(first_ref.data(), d.ref.data(), grad_x_floats * 4) != 0) {
      t.fused_row.check = "ref, DIFFERS across threads";
      t.fused_row.check_failed = true;
      progress.warn(tag + " fused: grad_x is not bitwise identical to the run with " +
                    std::to_string(config.threads.front()) + " threads (SPEC §5)");
    }
    d.timed.push_back(&t.fused);

    // fused, fast bf16 (outside SPEC §5's order: checked with the tolerance).
    t.fast_row = base;
    t.fast_row.path = "fused";
    t.fast_row.mode = "fast-bf16";
    if (d.format == cli::FloatFormat::kBF16 && config.fast_bf16) {
      progress.step(tag + " fused fast-bf16");
      fill_nan(d.out);
      try {
        t.fast_runs = run_alone(t.fast, &t.fast_rss);
        check_within_tolerance(t.fast_row, "fused fast-bf16");
        // Outside SPEC §5's order, the mode is still bitwise reproducible
        // across thread counts (README "Fast bf16 mode").
        if (cross_threads && threads == config.threads.front()) {
          first_fast = bits_hash(d.out);
        } else if (cross_threads && !t.fast_row.check_failed && bits_hash(d.out) != first_fast) {
          t.fast_row.check += ", DIFFERS across threads";
          t.fast_row.check_failed = true;
          progress.warn(tag + " fused fast-bf16: grad_x is not bitwise identical to the run with " +
                        std::to_string(config.threads.front()) + " threads");
        }
        d.timed.push_back(&t.fast);
      } catch (const moegrad::Error& e) {
        if (e.status() != MOEGRAD_STATUS_ISA_UNAVAILABLE) throw;
        add_note(report, std::string("fast-bf16 skipped: ") + e.what());
      }
    }

    // non-fused with moegrad's kernels: the same bits as the fused path.
    progress.step(tag + " nonfused");
    fill_nan(d.out);
    run_alone(t.nonfused, &t.nonfused_rss);
    t.nf_row = base;
    t.nf_row.path = "nonfused";
    const Diff nf_diff = compare(d.out.as<float>(), d.ref.as<float>(), grad_x_floats);
    t.nf_row.check = nf_diff.identical ? "bitwise" : "DIFFERS";
    t.nf_row.check_failed = !nf_diff.identical;
    if (!nf_diff.identical) {
      progress.warn(tag + " nonfused: grad_x is not bitwise identical to the fused one (max |diff| = " +
                    format_g("%.3g", nf_diff.max_abs_diff) + ")");
    }
    d.timed.push_back(&t.nonfused);

    // non-fused with oneDNN.
    progress.step(tag + " onednn-nonfused");
    fill_nan(d.out);
    t.dnn_row = base;
    t.dnn_row.path = "onednn-nonfused";
    t.onednn_runs = run_alone(t.onednn, &t.onednn_rss, [&] {
      t.onednn_ws = t.onednn_impl->workspace_bytes();
      t.onednn_name = t.onednn_impl->implementation();
    });
    if (t.onednn_runs) {
      check_within_tolerance(t.dnn_row, "onednn-nonfused");
      d.timed.push_back(&t.onednn);
    } else {
      t.dnn_row.check = "n/a";
    }
  }
}

}  // namespace

int default_reps(double warm_up_seconds) {
  if (!(warm_up_seconds > 0)) return kMaxDefaultReps;  // too short to time (or NaN)
  const double fit = std::ceil(kRoundsBudgetSeconds / warm_up_seconds);
  return static_cast<int>(std::clamp<double>(fit, kMinDefaultReps, kMaxDefaultReps));
}

ShapeReport run_shape(const ShapeSpec& shape, const RunConfig& config, const std::vector<FmaLoop*>& fma_loops,
                      Progress& progress) {
  // Without --reps, chosen from the first group's warm-up round (below) and
  // kept for the other groups, so that every path of the shape has the same.
  std::optional<int> reps = config.reps;
  ShapeReport report{shape, {}, {}, 0};
  const double flops = 2.0 * static_cast<double>(shape.m()) * static_cast<double>(shape.n) *
                       static_cast<double>(shape.k);

  progress.status(shape.name + ": routing");
  const cli::Routing routing = cli::make_routing(shape.batch, shape.top_k, shape.experts, cli::kDefaultSeed);

  // Each dtype alone: its inputs, its paths run once each, its inputs freed.
  std::vector<std::unique_ptr<DtypeRun>> runs;
  for (const cli::FloatFormat format : config.dtypes) {
    runs.push_back(std::make_unique<DtypeRun>());
    DtypeRun& d = *runs.back();
    d.format = format;
    d.dtype = cli::format_name(format);
    d.label = shape.name + " " + d.dtype;
    progress.status(d.label + ": generating inputs");
    allocate_buffers(d, shape, routing);
    run_alone_and_check(d, shape, config, &report, progress);
    free_buffers(d);
  }

  // Then all paths of every dtype and thread count timed together,
  // interleaved: ratios between dtypes (f16 and bf16 against f32), between
  // thread counts and between paths then compare runs made in the same
  // minutes, not minutes apart (the host's speed drifts more than the
  // effects measured). Every dtype's inputs are held meanwhile, unless
  // they would not fit in the memory available: then the dtypes are timed
  // in groups, with a note. The FMA loop runs in the same rounds: the peak
  // is the median of its runs at the start and its timed runs in them.
  std::vector<uint64_t> bytes;
  uint64_t total_bytes = 0;
  for (const std::unique_ptr<DtypeRun>& d : runs) {
    bytes.push_back(timing_bytes(*d, shape));
    total_bytes += bytes.back();
  }
  const std::optional<AvailableMemory> available = available_memory();
  std::optional<uint64_t> budget = available ? std::optional<uint64_t>(available->bytes / 10 * 9) : std::nullopt;
  const bool capped = config.max_memory_bytes && (!budget || *config.max_memory_bytes < *budget);
  if (capped) budget = config.max_memory_bytes;
  std::vector<size_t> starts = timing_groups(bytes, budget);
  const std::string limit =
      !budget ? std::string()
      : capped
          ? format_g("%.3g", static_cast<double>(*budget) / (1u << 30)) + " GiB are allowed (--max-memory)"
          : format_g("%.1f", static_cast<double>(available->bytes) / (1u << 30)) + " GiB are available (" +
                available->source() + ")";
  // A dtype cannot be timed in less than its own inputs: it runs anyway,
  // and the run says that it held more than the budget.
  for (size_t i = 0; i < runs.size(); ++i) {
    if (budget && bytes[i] > *budget) {
      add_note(&report, runs[i]->dtype + "'s timing alone holds about " +
                            format_g("%.3g", static_cast<double>(bytes[i]) / (1u << 30)) + " GiB, and " + limit +
                            "; timed anyway");
    }
  }
  if (starts.size() > 1) {
    std::string groups;
    for (size_t g = 0; g < starts.size(); ++g) {
      const size_t end = g + 1 < starts.size() ? starts[g + 1] : runs.size();
      groups += g ? " | " : "";
      for (size_t i = starts[g]; i < end; ++i) groups += (i > starts[g] ? ", " : "") + runs[i]->dtype;
    }
    add_note(&report, "dtypes timed in separate rounds (" + groups + "): together they would hold about " +
                          format_g("%.3g", static_cast<double>(total_bytes) / (1u << 30)) + " GiB, and " + limit +
                          "; ratios across groups compare different minutes");
  }
  starts.push_back(runs.size());
  std::vector<size_t> loop_runs_before;  // each loop's run count before this shape's rounds
  for (const FmaLoop* loop : fma_loops) loop_runs_before.push_back(loop->runs());
  for (size_t g = 0; g + 1 < starts.size(); ++g) {
    std::vector<TimedPath*> timed;
    std::string what = shape.name;
    for (size_t i = starts[g]; i < starts[g + 1]; ++i) {
      DtypeRun& d = *runs[i];
      progress.status(d.label + ": generating inputs for the timing");
      allocate_buffers(d, shape, routing);
      timed.insert(timed.end(), d.timed.begin(), d.timed.end());
      if (starts.size() > 2) what += (i > starts[g] ? "," : " ") + d.dtype;
    }
    const size_t path_count = timed.size();
    std::vector<TimedPath> loop_paths = fma_loop_paths(fma_loops);
    for (TimedPath& p : loop_paths) timed.push_back(&p);
    for (TimedPath* path : timed) {
      if (!path->prepare()) throw std::runtime_error(what + ": a path that ran alone cannot be prepared again");
    }
    progress.status(what + ": warming up " + std::to_string(path_count) + " paths and the FMA loop");
    const double warm_up_seconds = warm_up(timed);
    if (!reps) reps = default_reps(warm_up_seconds);
    // The warm-up round's length is shown because it chose the default
    // rounds: the count can be checked against it.
    progress.status(what + ": timing " + std::to_string(path_count) + " paths interleaved, with the FMA loop, " +
                    std::to_string(*reps) + (*reps == 1 ? " round" : " rounds") + " (warm-up round " +
                    format_g("%.3f", warm_up_seconds) + " s)");
    time_interleaved(timed, *reps);
    for (TimedPath* path : timed) path->release();
    for (size_t i = starts[g]; i < starts[g + 1]; ++i) free_buffers(*runs[i]);
  }

  const std::string own = fma_loop_note(fma_loops, loop_runs_before);
  if (!own.empty()) add_note(&report, own);

  report.reps = reps.value_or(0);  // 0: no group timed (no dtype)
  auto fill_timing = [&](Row* r, const TimedPath& path, std::optional<uint64_t> workspace,
                         std::optional<uint64_t> peak_rss) {
    r->ms = path.ms.median;
    r->ms_min = path.ms.min;
    r->ms_max = path.ms.max;
    r->gflops = flops / (path.ms.median * 1e6);
    r->workspace_bytes = workspace;
    r->peak_rss_bytes = peak_rss;
  };
  for (const std::unique_ptr<DtypeRun>& d : runs) {
    for (const std::unique_ptr<ThreadPaths>& tp : d->per_threads) {
      ThreadPaths& t = *tp;
      fill_timing(&t.fused_row, t.fused, t.fused_ws, t.fused_rss);
      report.rows.push_back(t.fused_row);
      if (t.fast_runs) {
        fill_timing(&t.fast_row, t.fast, t.fast_ws, t.fast_rss);
        report.rows.push_back(t.fast_row);
      }
      fill_timing(&t.nf_row, t.nonfused, d_expanded_x_bytes(shape) + t.nonfused_ws, t.nonfused_rss);
      report.rows.push_back(t.nf_row);
      if (t.onednn_runs) {
        fill_timing(&t.dnn_row, t.onednn, t.onednn_ws, t.onednn_rss);
        add_note(&report, "onednn-nonfused " + d->dtype + ": " + OnednnNonfused::version() + ", implementation " +
                              t.onednn_name);
      } else {
        add_note(&report, "onednn-nonfused " + d->dtype + ": null: " + t.onednn_why);
      }
      report.rows.push_back(t.dnn_row);
    }
  }
  return report;
}

}  // namespace moegrad::bench
