// ab_compare: two builds of libmoegrad.so timed against each other in one
// process, call by call (the A/B the performance notes in the code and in
// docs/performance-history.md quote).
//
// On a shared VM the machine's speed drifts by up to a fifth within minutes,
// so two `moegrad bench` runs of two builds compare the host's moods as much
// as the code. Here both builds plan the same problem over the same inputs,
// and each round calls them back to back, the first of the two alternating
// from round to round. A round's ratio B/A carries whatever going first or
// second costs (up to 3-5 % either way in A/A runs here); the geometric mean
// of an A-first round's ratio and the next B-first one's cancels it. The
// median of those pairs' ratios is what the change is worth, with quartiles
// to show its spread. The same library given
// twice measures the noise floor of such a ratio (an A/A run).
//
// Every speed-up keeps SPEC §5's order, so the two builds' grad_x must match
// bit for bit: checked after the timing; a difference is exit status 3.
// --op times one of the layer operators instead, whose outputs must match
// the same way (`moegrad bench --op` times them against oneDNN).
#include <dlfcn.h>
#include <moegrad/moegrad.h>
#include <moegrad/moegrad_layer.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "aligned_buffer.h"
#include "bench_options.h"
#include "dl_tensor.h"
#include "float_formats.h"
#include "grad_x_diff.h"
#include "random_data.h"
#include "routing.h"
#include "stats.h"

namespace {

using moegrad::bench::ShapeSpec;
using moegrad::bench::UsageError;
using moegrad::cli::AlignedBuffer;
using moegrad::cli::FloatFormat;

const char kHelp[] =
    "Usage: ab_compare LIB_A LIB_B [--shape NAME|batch,top_k,G,K,N] [--dtype f32|f16|bf16]\n"
    "                  [--threads N] [--threads-b N] [--fast-bf16] [--fast-bf16-b]\n"
    "                  [--routing random|even] [--weight-layout kn|nk] [--rounds R]\n"
    "                  [--op grad-x|forward|weight-grad]\n"
    "\n"
    "Times moegrad_grad_x (or another --op) of two builds of libmoegrad.so (paths to the\n"
    ".so files) in one process: both plan the same problem over the same inputs, each\n"
    "round runs A and B back to back (which goes first alternates), and the median of the\n"
    "ratios B/A of pairs of rounds (an A-first round and the next B-first one, their\n"
    "geometric mean) is reported with its quartiles, min and max, beside each build's\n"
    "median time. The two outputs must be bitwise identical (exit status 3 if not; 1 if\n"
    "a call left any of its output unwritten). Give the same library twice for the noise\n"
    "floor (an A/A run).\n"
    "\n"
    "  --shape S      zmoe, large-token, fine-grained (as `moegrad bench`) or\n"
    "                 batch,top_k,G,K,N (default fine-grained)\n"
    "  --dtype D      f32, f16 or bf16 (default f32)\n"
    "  --threads N    threads of both contexts (default 1)\n"
    "  --threads-b N  B's threads instead: with one library twice, B/A is the inverse of\n"
    "                 the speed-up from --threads to --threads-b, measured call by call\n"
    "  --fast-bf16    the opt-in fast bf16 mode (bf16 only)\n"
    "  --fast-bf16-b  B only in the fast bf16 mode: its cost against the exact mode's, call\n"
    "                 by call; the two orders differ, so the outputs do (exit status 3),\n"
    "                 and the largest difference against max |output| is printed\n"
    "  --routing R    random: `moegrad bench`'s top-k routing (default); even: token b\n"
    "                 goes to experts (b*top_k + j) mod G, so every expert has the same\n"
    "                 rows when G divides batch*top_k (tails of one known length)\n"
    "  --weight-layout L  kn: weight [G, K, N] contiguous (default); nk: a [G, N, K]\n"
    "                 buffer viewed as [G, K, N] (stacked nn.Linear weights), which\n"
    "                 the row-vector engine does not take\n"
    "  --rounds R     timed rounds after 2 warm-up rounds, made even (default 22)\n"
    "  --op OP        grad-x: moegrad_grad_x (default); forward: moegrad_grouped_matmul,\n"
    "                 y [M, N] = x [M, K] @ weight per expert; weight-grad:\n"
    "                 moegrad_grouped_matmul_weight_grad, grad_weight [G, K, N] = x^T @\n"
    "                 grad_y per expert. x is random in [-1, 1], rows grouped as the\n"
    "                 routing's; outputs f32 (weight-grad: no --weight-layout)\n";

// The C API of one build, resolved from its handle.
struct Library {
  std::string path;
  void* handle = nullptr;
  decltype(&moegrad_version) version = nullptr;
  decltype(&moegrad_last_error_message) last_error = nullptr;
  decltype(&moegrad_context_create) context_create = nullptr;
  decltype(&moegrad_context_destroy) context_destroy = nullptr;
  decltype(&moegrad_context_set_num_threads) set_num_threads = nullptr;
  decltype(&moegrad_context_set_fast_bf16) set_fast_bf16 = nullptr;
  decltype(&moegrad_grad_x_get_workspace_size) get_workspace_size = nullptr;
  decltype(&moegrad_grad_x) grad_x = nullptr;
  decltype(&moegrad_executor_destroy) executor_destroy = nullptr;
  decltype(&moegrad_grouped_matmul_get_workspace_size) forward_workspace_size = nullptr;
  decltype(&moegrad_grouped_matmul) forward = nullptr;
  decltype(&moegrad_grouped_matmul_weight_grad_get_workspace_size) weight_grad_workspace_size = nullptr;
  decltype(&moegrad_grouped_matmul_weight_grad) weight_grad = nullptr;
  decltype(&moegrad_op_executor_destroy) op_executor_destroy = nullptr;
};

template <class Fn>
void resolve(const Library& lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib.handle, name));
  if (*fn == nullptr) throw std::runtime_error(lib.path + ": no symbol " + name);
}

// RTLD_LOCAL: each build's symbols stay its own, though both export the same
// names. Two paths of one file give one handle: an A/A run.
Library load(const std::string& path, bool layer_ops) {
  Library lib;
  lib.path = path;
  lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr) throw std::runtime_error(std::string("cannot load ") + dlerror());
  resolve(lib, "moegrad_version", &lib.version);
  resolve(lib, "moegrad_last_error_message", &lib.last_error);
  resolve(lib, "moegrad_context_create", &lib.context_create);
  resolve(lib, "moegrad_context_destroy", &lib.context_destroy);
  resolve(lib, "moegrad_context_set_num_threads", &lib.set_num_threads);
  resolve(lib, "moegrad_context_set_fast_bf16", &lib.set_fast_bf16);
  resolve(lib, "moegrad_grad_x_get_workspace_size", &lib.get_workspace_size);
  resolve(lib, "moegrad_grad_x", &lib.grad_x);
  resolve(lib, "moegrad_executor_destroy", &lib.executor_destroy);
  if (!layer_ops) return lib;  // a build older than the layer operators still loads
  resolve(lib, "moegrad_grouped_matmul_get_workspace_size", &lib.forward_workspace_size);
  resolve(lib, "moegrad_grouped_matmul", &lib.forward);
  resolve(lib, "moegrad_grouped_matmul_weight_grad_get_workspace_size", &lib.weight_grad_workspace_size);
  resolve(lib, "moegrad_grouped_matmul_weight_grad", &lib.weight_grad);
  resolve(lib, "moegrad_op_executor_destroy", &lib.op_executor_destroy);
  return lib;
}

using Op = moegrad::bench::BenchOp;

// What one call computes: its arguments, with the f32 output's DLTensor
// (shape and strides) that each build points at its own buffer.
struct Call {
  Op op = Op::kGradX;
  moegrad_grad_x_args grad_x{};
  moegrad_grouped_matmul_args forward{};
  moegrad_grouped_matmul_weight_grad_args weight_grad{};
  DLTensor out{};
  const char* out_name = "grad_x";

  size_t out_elements() const {
    size_t n = 1;
    for (int d = 0; d < out.ndim; ++d) n *= static_cast<size_t>(out.shape[d]);
    return n;
  }
};

// One build's runs: its context, workspace and output. An executor runs
// once, so every call plans again; only the run is timed, as `moegrad
// bench` times the fused path.
class BuildRuns {
 public:
  BuildRuns(const Library& lib, const Call& call, int threads, bool fast) : lib_(lib), call_(call) {
    const size_t n = call_.out_elements();
    out_ = AlignedBuffer(n * sizeof(float), call_.out_name);
    std::fill_n(out_.as<float>(), n, std::numeric_limits<float>::quiet_NaN());
    call_.out.data = out_.data();
    call_.grad_x.grad_x = &call_.out;
    call_.forward.y = &call_.out;
    call_.weight_grad.grad_weight = &call_.out;
    check(lib_.context_create(&ctx_), "moegrad_context_create");
    check(lib_.set_num_threads(ctx_, threads), "moegrad_context_set_num_threads");
    if (fast) check(lib_.set_fast_bf16(ctx_, 1), "moegrad_context_set_fast_bf16");
  }
  ~BuildRuns() {
    destroy_executors();
    if (ctx_ != nullptr) lib_.context_destroy(ctx_);
  }
  BuildRuns(const BuildRuns&) = delete;
  BuildRuns& operator=(const BuildRuns&) = delete;

  // Plans, then returns the milliseconds of the run call.
  double timed_call() {
    size_t bytes = 0;
    switch (call_.op) {
      case Op::kGradX:
        check(lib_.get_workspace_size(&call_.grad_x, ctx_, &bytes, &executor_), "moegrad_grad_x_get_workspace_size");
        break;
      case Op::kForward:
        check(lib_.forward_workspace_size(&call_.forward, ctx_, &bytes, &op_executor_),
              "moegrad_grouped_matmul_get_workspace_size");
        break;
      case Op::kWeightGrad:
        check(lib_.weight_grad_workspace_size(&call_.weight_grad, ctx_, &bytes, &op_executor_),
              "moegrad_grouped_matmul_weight_grad_get_workspace_size");
        break;
    }
    if (workspace_.size() < bytes) workspace_ = AlignedBuffer(bytes, "workspace");
    const auto t0 = std::chrono::steady_clock::now();
    void* const ws = workspace_.data();
    const moegrad_status s = call_.op == Op::kGradX     ? lib_.grad_x(ws, bytes, executor_, ctx_)
                             : call_.op == Op::kForward ? lib_.forward(ws, bytes, op_executor_, ctx_)
                                                        : lib_.weight_grad(ws, bytes, op_executor_, ctx_);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    destroy_executors();
    check(s, "the run");
    return ms;
  }
  const float* output() const { return out_.as<float>(); }

 private:
  void check(moegrad_status s, const char* what) const {
    if (s != MOEGRAD_STATUS_SUCCESS) throw std::runtime_error(lib_.path + ": " + what + ": " + lib_.last_error());
  }
  void destroy_executors() {
    if (executor_ != nullptr) lib_.executor_destroy(executor_);
    if (op_executor_ != nullptr) lib_.op_executor_destroy(op_executor_);
    executor_ = nullptr;
    op_executor_ = nullptr;
  }

  const Library& lib_;
  Call call_;
  AlignedBuffer out_, workspace_;
  moegrad_context* ctx_ = nullptr;
  moegrad_executor* executor_ = nullptr;
  moegrad_op_executor* op_executor_ = nullptr;
};

// A count in [1, hi], read as `moegrad bench` reads its own.
int parse_count(std::string_view s, const char* what, int hi) {
  const std::optional<int64_t> v = moegrad::bench::parse_int(s, 1, hi);
  if (!v)
    throw UsageError(std::string(what) + " '" + std::string(s) + "' is not an integer in [1, " + std::to_string(hi) +
                     "]");
  return static_cast<int>(*v);
}

struct Options {
  std::string lib_a, lib_b;
  ShapeSpec shape = moegrad::bench::parse_shape("fine-grained");
  FloatFormat format = FloatFormat::kF32;
  int threads = 1;
  int threads_b = 0;  // 0: as threads
  bool fast_bf16 = false;
  bool fast_bf16_b = false;  // B only
  bool even_routing = false;
  bool weight_nk = false;  // a [G, N, K] buffer viewed as [G, K, N]
  int rounds = 22;
  Op op = Op::kGradX;
};

Options parse_options(int argc, char** argv) {
  Options o;
  std::vector<std::string_view> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) throw UsageError(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      std::exit(0);
    } else if (a == "--shape") {
      o.shape = moegrad::bench::parse_shape(value());
    } else if (a == "--dtype") {
      const std::string_view d = value();
      const std::optional<FloatFormat> f = moegrad::cli::format_from_name(d);
      if (!f) throw UsageError("--dtype: f32, f16 or bf16, not '" + std::string(d) + "'");
      o.format = *f;
    } else if (a == "--threads") {
      o.threads = parse_count(value(), "--threads", MOEGRAD_MAX_THREADS);
    } else if (a == "--threads-b") {
      o.threads_b = parse_count(value(), "--threads-b", MOEGRAD_MAX_THREADS);
    } else if (a == "--rounds") {
      o.rounds = parse_count(value(), "--rounds", 100000);
    } else if (a == "--fast-bf16") {
      o.fast_bf16 = true;
    } else if (a == "--fast-bf16-b") {
      o.fast_bf16_b = true;
    } else if (a == "--routing") {
      const std::string_view r = value();
      if (r != "random" && r != "even") throw UsageError("--routing: random or even, not '" + std::string(r) + "'");
      o.even_routing = r == "even";
    } else if (a == "--op") {
      const std::string_view v = value();
      const std::optional<Op> op = moegrad::bench::op_from_name(v);
      if (!op) throw UsageError("--op: grad-x, forward or weight-grad, not '" + std::string(v) + "'");
      o.op = *op;
    } else if (a == "--weight-layout") {
      const std::string_view l = value();
      if (l != "kn" && l != "nk") throw UsageError("--weight-layout: kn or nk, not '" + std::string(l) + "'");
      o.weight_nk = l == "nk";
    } else if (a.starts_with("-")) {
      throw UsageError("unknown option " + std::string(a));
    } else {
      pos.push_back(a);
    }
  }
  if (pos.size() != 2) throw UsageError("two libraries are needed: LIB_A LIB_B");
  if ((o.fast_bf16 || o.fast_bf16_b) && o.format != FloatFormat::kBF16)
    throw UsageError("--fast-bf16 and --fast-bf16-b need --dtype bf16");
  if (o.weight_nk && o.op == Op::kWeightGrad) throw UsageError("--weight-layout: weight-grad reads no weight");
  if (o.fast_bf16) o.fast_bf16_b = true;
  if (o.threads_b == 0) o.threads_b = o.threads;
  o.lib_a = pos[0];
  o.lib_b = pos[1];
  return o;
}

// Token b's slot j goes to expert (b*top_k + j) mod G, which is expanded
// position p = b*top_k + j mod G: a token's top_k consecutive positions get
// distinct experts (top_k <= G). Rows sorted stably by expert, as
// MoeInitRouting sorts them.
moegrad::cli::Routing even_routing(const ShapeSpec& s) {
  moegrad::cli::Routing r;
  for (int64_t g = 0; g < s.experts; ++g) {
    for (int64_t pos = g; pos < s.m(); pos += s.experts) r.expanded_row_idx.push_back(pos);
    r.group_list.push_back((s.m() - g + s.experts - 1) / s.experts);
  }
  return r;
}

int run(const Options& o) {
  const Library a = load(o.lib_a, o.op != Op::kGradX), b = load(o.lib_b, o.op != Op::kGradX);
  const ShapeSpec& s = o.shape;
  const moegrad::cli::Routing routing =
      o.even_routing ? even_routing(s) : moegrad::cli::make_routing(s.batch, s.top_k, s.experts, moegrad::cli::kDefaultSeed);

  const auto M = static_cast<uint64_t>(s.m()), N = static_cast<uint64_t>(s.n), K = static_cast<uint64_t>(s.k),
             G = static_cast<uint64_t>(s.experts);
  const auto esize = static_cast<uint64_t>(moegrad::cli::format_bytes(o.format));
  // The inputs `moegrad bench` times; x (the layer operators' expanded_x)
  // from a stream of its own (random_data.h). Only the inputs of the op are made.
  const bool needs_weight = o.op != Op::kWeightGrad, needs_grad_y = o.op != Op::kForward,
             needs_x = o.op != Op::kGradX;
  AlignedBuffer grad_y(needs_grad_y ? M * N * esize : 0, "grad_y"),
      weight(needs_weight ? G * K * N * esize : 0, "weight"), x(needs_x ? M * K * esize : 0, "x");
  if (needs_grad_y)
    moegrad::cli::fill_uniform(grad_y.data(), o.format, M * N, moegrad::cli::kDefaultSeed,
                               moegrad::cli::kGradYStream);
  if (needs_weight)
    moegrad::cli::fill_uniform(weight.data(), o.format, G * K * N, moegrad::cli::kDefaultSeed,
                               moegrad::cli::kWeightStream);
  if (needs_x) moegrad::cli::fill_uniform(x.data(), o.format, M * K, moegrad::cli::kDefaultSeed,
                                        moegrad::cli::kExpandedXStream);
  int64_t gy_shape[2] = {s.m(), s.n}, w_shape[3] = {s.experts, s.k, s.n}, idx_shape[1] = {s.m()},
          gl_shape[1] = {s.experts}, gx_shape[2] = {s.batch, s.k}, x_shape[2] = {s.m(), s.k};
  const DLDataType dl = moegrad::cli::format_dl_dtype(o.format);
  const DLTensor gy_t = moegrad::cli::make_dl_tensor(grad_y.data(), dl, gy_shape, 2);
  const DLTensor x_t = moegrad::cli::make_dl_tensor(x.data(), dl, x_shape, 2);
  DLTensor w_t = moegrad::cli::make_dl_tensor(weight.data(), dl, w_shape, 3);
  int64_t w_nk_strides[3] = {s.k * s.n, 1, s.k};
  if (o.weight_nk) w_t.strides = w_nk_strides;
  const DLTensor idx_t = moegrad::cli::make_dl_tensor(const_cast<int64_t*>(routing.expanded_row_idx.data()),
                                                      {kDLInt, 64, 1}, idx_shape, 1);
  const DLTensor gl_t = moegrad::cli::make_dl_tensor(const_cast<int64_t*>(routing.group_list.data()),
                                                     {kDLInt, 64, 1}, gl_shape, 1);
  Call call;
  call.op = o.op;
  call.grad_x = {&gy_t, &w_t, &idx_t, &gl_t, nullptr, s.batch, s.top_k, MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL,
                 MOEGRAD_GROUP_LIST_COUNT};
  call.forward = {&x_t, &w_t, &gl_t, nullptr, MOEGRAD_GROUP_LIST_COUNT};
  call.weight_grad = {&x_t, &gy_t, &gl_t, nullptr, MOEGRAD_GROUP_LIST_COUNT, 0};
  call.out = moegrad::cli::make_dl_tensor(nullptr, {kDLFloat, 32, 1},
                                          o.op == Op::kGradX     ? gx_shape
                                          : o.op == Op::kForward ? gy_shape
                                                                 : w_shape,
                                          o.op == Op::kWeightGrad ? 3 : 2);
  call.out_name = o.op == Op::kGradX ? "grad_x" : o.op == Op::kForward ? "y" : "grad_weight";

  BuildRuns run_a(a, call, o.threads, o.fast_bf16), run_b(b, call, o.threads_b, o.fast_bf16_b);
  const auto [min_rows, max_rows] = std::minmax_element(routing.group_list.begin(), routing.group_list.end());
  std::printf("%s, shape %s (batch %" PRId64 ", top_k %" PRId64 ", G %" PRId64 ", K %" PRId64 ", N %" PRId64
              "; %s routing, %" PRId64 "-%" PRId64 " rows per expert), %s%s%s\n",
              o.op == Op::kGradX     ? "moegrad_grad_x"
              : o.op == Op::kForward ? "moegrad_grouped_matmul"
                                     : "moegrad_grouped_matmul_weight_grad",
              s.name.c_str(), s.batch, s.top_k, s.experts, s.k, s.n, o.even_routing ? "even" : "random", *min_rows,
              *max_rows, moegrad::cli::format_name(o.format), o.fast_bf16 ? " fast-bf16" : "",
              o.weight_nk ? ", weight a [G, N, K] buffer" : "");
  std::printf("A %s (moegrad %s), %d thread(s)\nB %s (moegrad %s), %d thread(s)%s\n", a.path.c_str(),
              a.version(), o.threads, b.path.c_str(), b.version(), o.threads_b,
              o.fast_bf16_b && !o.fast_bf16 ? ", fast bf16" : "");
  if (a.handle == b.handle && o.fast_bf16 == o.fast_bf16_b)
    std::printf(o.threads == o.threads_b ? "(one library twice: an A/A run, the noise floor)\n"
                                         : "(one library twice: B/A is the inverse of the speed-up)\n");

  constexpr int kWarmup = 2;
  static_assert(kWarmup % 2 == 0, "the timed rounds must start with an A-first one, which a pair begins with");
  const int rounds = o.rounds + o.rounds % 2;
  std::vector<double> ta, tb, ratio;
  double first_ratio = 0;
  for (int round = 0; round < kWarmup + rounds; ++round) {
    double ms_a = 0, ms_b = 0;
    if (round % 2 == 0) {
      ms_a = run_a.timed_call();
      ms_b = run_b.timed_call();
    } else {
      ms_b = run_b.timed_call();
      ms_a = run_a.timed_call();
    }
    if (round < kWarmup) continue;
    ta.push_back(ms_a);
    tb.push_back(ms_b);
    if (round % 2 == 0)
      first_ratio = ms_b / ms_a;
    else
      ratio.push_back(std::sqrt(first_ratio * (ms_b / ms_a)));
    std::fprintf(stderr, "\rround %d/%d", round - kWarmup + 1, rounds);
  }
  std::fputc('\n', stderr);
  const double gflop = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) * 1e-9;
  for (auto* v : {&ta, &tb, &ratio}) std::sort(v->begin(), v->end());
  using moegrad::bench::sorted_quantile;
  const double med_a = sorted_quantile(ta, 0.5), med_b = sorted_quantile(tb, 0.5);
  std::printf("A median %.3f ms (%.1f GFLOP/s), B median %.3f ms (%.1f GFLOP/s), %d rounds\n", med_a,
              gflop / med_a * 1e3, med_b, gflop / med_b * 1e3, rounds);
  std::printf("B/A time (%zu pairs of rounds): median %.4fx, quartiles %.4fx-%.4fx, min %.4fx, max %.4fx\n",
              ratio.size(), sorted_quantile(ratio, 0.5), sorted_quantile(ratio, 0.25), sorted_quantile(ratio, 0.75),
              ratio.front(), ratio.back());

  const size_t n = call.out_elements();
  // The outputs start NaN-filled and random inputs in [-1, 1] give no NaN:
  // one left means a call did not write it, and two such would compare equal.
  for (const BuildRuns* r : {&run_a, &run_b}) {
    const float* out = r->output();
    if (std::any_of(out, out + n, [](float v) { return std::isnan(v); })) {
      std::printf("%s: %s left elements unwritten (NaN)\n", call.out_name, r == &run_a ? "A" : "B");
      return 1;
    }
  }
  const moegrad::bench::Diff diff = moegrad::bench::compare(run_b.output(), run_a.output(), n);
  if (!diff.identical) {
    std::printf("%s: %" PRIu64 " of %zu elements differ between A and B (largest difference %.3g of max "
                "|%s| %.3g)\n",
                call.out_name, diff.differing, n, diff.max_abs_diff, call.out_name, diff.max_abs_ref);
    return 3;
  }
  std::printf("%s: A and B bitwise identical\n", call.out_name);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_options(argc, argv));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ab_compare: %s\n(ab_compare --help for usage)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ab_compare: error: %s\n", e.what());
    return 1;
  }
}
