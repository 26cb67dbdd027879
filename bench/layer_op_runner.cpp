#include "layer_op_runner.h"

#include <moegrad/moegrad.h>
#include <moegrad/moegrad.hpp>
#include <moegrad/moegrad_layer.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "aligned_buffer.h"
#include "dl_tensor.h"
#include "interleaved_timing.h"
#include "layer_op_reference.h"
#include "onednn_layer_op.h"
#include "onednn_loader.h"
#include "random_data.h"
#include "routing.h"
#include "runner_support.h"

namespace moegrad::bench {
namespace {

// One thread count's paths and what they measured: moegrad's (in the exact
// order; with bf16 where the CPU runs it, in the fast bf16 mode too) and
// oneDNN's. Heap-held: the paths' closures point into it.
struct OpThreadPaths {
  explicit OpThreadPaths(int n) : threads(n) {
    ctx.set_num_threads(n);
    fast_ctx.set_num_threads(n);
    fast_ctx.set_fast_bf16(true);
  }
  int threads;
  moegrad::Context ctx, fast_ctx;
  OnednnLayerOp onednn_impl;
  std::string onednn_why;
  uint64_t moegrad_ws = 0, fast_ws = 0;
  bool onednn_runs = false, fast_runs = false;
  TimedPath ours, fast, onednn;
  Row ours_row, fast_row, onednn_row;
};

// One dtype of a shape: its inputs, the two outputs (moegrad's, oneDNN's)
// and the calls' arguments. Heap-held, for the same reason.
struct OpDtypeRun {
  cli::FloatFormat format = cli::FloatFormat::kF32;
  std::string dtype, label;
  cli::AlignedBuffer x, other;  // other: the weight (forward) or grad_y (weight grad)
  // theirs: oneDNN's output, and the fast bf16 mode's once oneDNN's is checked.
  cli::AlignedBuffer ours, theirs, ws;
  int64_t x_shape[2] = {}, other_shape[3] = {}, gl_shape[1] = {}, out_shape[3] = {};
  DLTensor x_t{}, other_t{}, gl_t{}, ours_t{};
  moegrad_grouped_matmul_args forward{};
  moegrad_grouped_matmul_weight_grad_args weight_grad{};
  LayerOpProblem problem;
  std::vector<std::unique_ptr<OpThreadPaths>> per_threads;
};

// Plans (untimed; an executor runs once) and times one run of moegrad's
// operator, writing `out`.
double moegrad_run(OpDtypeRun& d, BenchOp op, const moegrad::Context& ctx, cli::AlignedBuffer& out,
                   uint64_t* ws_bytes) {
  DLTensor out_t = d.ours_t;
  out_t.data = out.data();
  moegrad_grouped_matmul_args forward = d.forward;
  moegrad_grouped_matmul_weight_grad_args weight_grad = d.weight_grad;
  forward.y = weight_grad.grad_weight = &out_t;
  moegrad::OpExecutor ex = op == BenchOp::kForward ? moegrad::OpExecutor(forward, ctx)
                                                   : moegrad::OpExecutor(weight_grad, ctx);
  *ws_bytes = ex.workspace_bytes();
  if (d.ws.data() == nullptr || d.ws.size() < ex.workspace_bytes())
    d.ws = cli::AlignedBuffer(ex.workspace_bytes(), "the workspace");
  const Clock::time_point t0 = Clock::now();
  ex.run(d.ws.data(), ex.workspace_bytes(), ctx);
  return ms_since(t0);
}

// x [M, K] from its own stream (random_data.h), and the weight [G, K, N] or
// grad_y [M, N] from the streams grad-x's timing uses; both outputs
// NaN-filled, so an element a path leaves unwritten fails its check.
void allocate(OpDtypeRun& d, const ShapeSpec& s, BenchOp op, const cli::Routing& routing) {
  const auto M = static_cast<uint64_t>(s.m()), N = static_cast<uint64_t>(s.n), K = static_cast<uint64_t>(s.k),
             G = static_cast<uint64_t>(s.experts);
  const auto esize = static_cast<uint64_t>(cli::format_bytes(d.format));
  const bool forward = op == BenchOp::kForward;
  d.x = cli::AlignedBuffer(M * K * esize, "x");
  cli::fill_uniform(d.x.data(), d.format, M * K, cli::kDefaultSeed, cli::kExpandedXStream);
  const uint64_t other = forward ? G * K * N : M * N;
  d.other = cli::AlignedBuffer(other * esize, forward ? "weight" : "grad_y");
  cli::fill_uniform(d.other.data(), d.format, other, cli::kDefaultSeed,
                    forward ? cli::kWeightStream : cli::kGradYStream);
  const uint64_t out = forward ? M * N : G * K * N;
  d.ours = cli::AlignedBuffer(out * 4, forward ? "y (moegrad)" : "grad_weight (moegrad)");
  d.theirs = cli::AlignedBuffer(out * 4, forward ? "y (oneDNN)" : "grad_weight (oneDNN)");
  fill_nan(d.ours);
  fill_nan(d.theirs);

  d.x_shape[0] = s.m();
  d.x_shape[1] = s.k;
  const int other_dims = forward ? 3 : 2;
  if (forward) {
    d.other_shape[0] = s.experts;
    d.other_shape[1] = s.k;
    d.other_shape[2] = s.n;
  } else {
    d.other_shape[0] = s.m();
    d.other_shape[1] = s.n;
  }
  d.gl_shape[0] = s.experts;
  const int out_dims = forward ? 2 : 3;
  if (forward) {
    d.out_shape[0] = s.m();
    d.out_shape[1] = s.n;
  } else {
    d.out_shape[0] = s.experts;
    d.out_shape[1] = s.k;
    d.out_shape[2] = s.n;
  }
  const DLDataType dl = cli::format_dl_dtype(d.format);
  d.x_t = cli::make_dl_tensor(d.x.data(), dl, d.x_shape, 2);
  d.other_t = cli::make_dl_tensor(d.other.data(), dl, d.other_shape, other_dims);
  d.gl_t = cli::make_dl_tensor(const_cast<int64_t*>(routing.group_list.data()), {kDLInt, 64, 1}, d.gl_shape, 1);
  d.ours_t = cli::make_dl_tensor(d.ours.data(), {kDLFloat, 32, 1}, d.out_shape, out_dims);
  d.forward = {&d.x_t, &d.other_t, &d.gl_t, &d.ours_t, MOEGRAD_GROUP_LIST_COUNT};
  d.weight_grad = {&d.x_t, &d.other_t, &d.gl_t, &d.ours_t, MOEGRAD_GROUP_LIST_COUNT, 0};
  d.problem.op = op;
  d.problem.format = d.format;
  d.problem.x = d.x.data();
  d.problem.weight = forward ? d.other.data() : nullptr;
  d.problem.grad_y = forward ? nullptr : d.other.data();
  d.problem.group_list = routing.group_list.data();
  d.problem.out = d.theirs.as<float>();
  d.problem.experts = s.experts;
  d.problem.k = s.k;
  d.problem.n = s.n;
  d.problem.m = s.m();
}

// Rows of y, or of grad_weight, checked against float64 sums: a y row of
// zmoe costs K x N = 14.7 M multiply-adds.
constexpr int64_t kFloat64Samples = 16;

// Defines and runs d's paths alone, with the checks; returns the paths
// that run, to be timed.
std::vector<TimedPath*> run_alone_and_check(OpDtypeRun& d, const ShapeSpec& s, BenchOp op, const RunConfig& config,
                                            ShapeReport* report, Progress& progress) {
  const size_t out_floats = d.ours.size() / sizeof(float);
  const bool cross_threads = config.threads.size() > 1;
  // moegrad's output of the first thread count, for the later ones, as a
  // hash of its bits: a copy would be a third 3.5 GB buffer at zmoe's
  // weight grad (the same for the fast bf16 mode's).
  uint64_t first = 0, first_fast = 0;
  const bool fast = d.format == cli::FloatFormat::kBF16 && config.fast_bf16;
  const char* out_name = op == BenchOp::kForward ? "y" : "grad_weight";
  std::vector<TimedPath*> timed;
  OpDtypeRun* dp = &d;
  for (const int threads : config.threads) {
    d.per_threads.push_back(std::make_unique<OpThreadPaths>(threads));
    OpThreadPaths& t = *d.per_threads.back();
    OpThreadPaths* tp = &t;
    const std::string tag = d.label + " t=" + std::to_string(threads);
    Row base = shape_row(s, d.dtype, threads);
    base.op = op_name(op);

    t.ours = {[] { return true; },
              [dp, tp, op] { return moegrad_run(*dp, op, tp->ctx, dp->ours, &tp->moegrad_ws); }, [] {}, {}};
    t.fast = {[] { return true; },
              [dp, tp, op] { return moegrad_run(*dp, op, tp->fast_ctx, dp->theirs, &tp->fast_ws); }, [] {}, {}};
    t.onednn = {[tp, dp] { return tp->onednn_impl.prepare(dp->problem, tp->threads, &tp->onednn_why); },
                [tp] {
                  const Clock::time_point t0 = Clock::now();
                  tp->onednn_impl.run();
                  return ms_since(t0);
                },
                [] {}, {}};

    progress.step(tag + " moegrad");
    fill_nan(d.ours);
    t.ours.run();
    t.ours_row = base;
    t.ours_row.path = "moegrad";
    t.ours_row.check = "ref";
    if (threads == config.threads.front()) {
      const LayerOpReferenceCheck f64 = check_layer_op_against_float64(d.problem, d.ours.as<float>(), kFloat64Samples);
      const std::string failure = float64_check(f64.within_bound, f64.max_error_over_bound, out_name, &t.ours_row);
      if (!failure.empty()) progress.warn(tag + " moegrad: " + failure);
      if (cross_threads) first = bits_hash(d.ours);
    } else if (bits_hash(d.ours) != first) {
      t.ours_row.check = "ref, DIFFERS across threads";
      t.ours_row.check_failed = true;
      progress.warn(tag + " moegrad: " + out_name + " is not bitwise identical to the run with " +
                    std::to_string(config.threads.front()) + " threads");
    }
    timed.push_back(&t.ours);

    progress.step(tag + " onednn");
    t.onednn_row = base;
    t.onednn_row.path = "onednn";
    fill_nan(d.theirs);
    t.onednn_runs = t.onednn.prepare();
    if (!t.onednn_runs) {
      t.onednn_row.check = "n/a";
      add_note(report, "onednn " + d.dtype + ": null: " + t.onednn_why);
    } else {
      t.onednn.run();
      add_note(report, "onednn " + d.dtype + ": " + loaded_module().api->onednn_version() + ", implementation " +
                           t.onednn_impl.implementation());
      const std::string failure =
          tolerance_check(d.theirs.as<float>(), d.ours.as<float>(), out_floats, out_name, &t.onednn_row);
      if (!failure.empty()) progress.warn(tag + " onednn: " + out_name + " differs from moegrad's: " + failure);
      timed.push_back(&t.onednn);
    }

    // The fast bf16 mode sums in another order: within the tolerance of the
    // exact output, and bitwise the same at every thread count.
    if (!fast) continue;
    progress.step(tag + " moegrad fast-bf16");
    t.fast_row = base;
    t.fast_row.path = "moegrad";
    t.fast_row.mode = "fast-bf16";
    fill_nan(d.theirs);
    t.fast.run();
    t.fast_runs = true;
    const std::string failure =
        tolerance_check(d.theirs.as<float>(), d.ours.as<float>(), out_floats, out_name, &t.fast_row);
    if (!failure.empty()) progress.warn(tag + " moegrad fast-bf16: " + out_name + " differs from the exact one: " + failure);
    if (cross_threads && threads == config.threads.front()) {
      first_fast = bits_hash(d.theirs);
    } else if (cross_threads && !t.fast_row.check_failed && bits_hash(d.theirs) != first_fast) {
      t.fast_row.check += ", DIFFERS across threads";
      t.fast_row.check_failed = true;
      progress.warn(tag + " moegrad fast-bf16: " + out_name + " is not bitwise identical to the run with " +
                    std::to_string(config.threads.front()) + " threads");
    }
    timed.push_back(&t.fast);
  }
  return timed;
}

}  // namespace

int layer_op_shape_steps(const RunConfig& config) {
  int per_thread = 0;
  for (const cli::FloatFormat f : config.dtypes) per_thread += f == cli::FloatFormat::kBF16 && config.fast_bf16 ? 3 : 2;
  return per_thread * static_cast<int>(config.threads.size());
}

ShapeReport run_layer_op_shape(const ShapeSpec& shape, BenchOp op, const RunConfig& config,
                               const std::vector<FmaLoop*>& fma_loops, Progress& progress) {
  ShapeReport report;
  report.shape = shape;
  const cli::Routing routing = cli::make_routing(shape.batch, shape.top_k, shape.experts, cli::kDefaultSeed);
  const double flops = 2.0 * static_cast<double>(shape.m()) * static_cast<double>(shape.n) *
                       static_cast<double>(shape.k);
  std::optional<int> reps = config.reps;
  std::vector<size_t> loop_runs_before;
  for (const FmaLoop* loop : fma_loops) loop_runs_before.push_back(loop->runs());

  for (const cli::FloatFormat format : config.dtypes) {
    auto d = std::make_unique<OpDtypeRun>();
    d->format = format;
    d->dtype = cli::format_name(format);
    d->label = shape.name + " " + op_name(op) + " " + d->dtype;
    progress.status(d->label + ": generating inputs");
    allocate(*d, shape, op, routing);
    std::vector<TimedPath*> timed = run_alone_and_check(*d, shape, op, config, &report, progress);

    const size_t path_count = timed.size();
    std::vector<TimedPath> loop_paths = fma_loop_paths(fma_loops);
    for (TimedPath& p : loop_paths) timed.push_back(&p);
    progress.status(d->label + ": warming up " + std::to_string(path_count) + " paths and the FMA loop");
    const double warm_up_seconds = warm_up(timed);
    if (!reps) reps = default_reps(warm_up_seconds);
    progress.status(d->label + ": timing " + std::to_string(path_count) + " paths interleaved, with the FMA loop, " +
                    std::to_string(*reps) + (*reps == 1 ? " round" : " rounds") + " (warm-up round " +
                    format_g("%.3f", warm_up_seconds) + " s)");
    time_interleaved(timed, *reps);

    auto fill_timing = [&](Row* r, const TimedPath& path, uint64_t workspace) {
      r->ms = path.ms.median;
      r->ms_min = path.ms.min;
      r->ms_max = path.ms.max;
      r->gflops = flops / (path.ms.median * 1e6);
      r->workspace_bytes = workspace;
    };
    for (const std::unique_ptr<OpThreadPaths>& tp : d->per_threads) {
      OpThreadPaths& t = *tp;
      fill_timing(&t.ours_row, t.ours, t.moegrad_ws);
      report.rows.push_back(t.ours_row);
      if (t.onednn_runs) fill_timing(&t.onednn_row, t.onednn, t.onednn_impl.workspace_bytes());
      if (t.fast_runs) {
        fill_timing(&t.fast_row, t.fast, t.fast_ws);
        report.rows.push_back(t.fast_row);
      }
      report.rows.push_back(t.onednn_row);
    }
  }
  if (config.dtypes.size() > 1) {
    add_note(&report, "each dtype was timed in its own rounds, with only its buffers held: compare dtypes with care");
  }
  const std::string own = fma_loop_note(fma_loops, loop_runs_before);
  if (!own.empty()) add_note(&report, own);
  report.reps = reps.value_or(0);
  return report;
}

}  // namespace moegrad::bench
