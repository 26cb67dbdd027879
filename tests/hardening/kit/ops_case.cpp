#include "ops_case.h"

#include <moegrad/moegrad_layer.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ops_case_decode.h"
#include "ops_reference.h"
#include "ops_runner.h"

namespace mgh {
namespace {

using ops::Case;
using ops::Fault;
using ops::Slot;
using ops::kNumRowsGuard;
using ops::kMaxSlots;

bool contains(const std::vector<moegrad_status>& v, moegrad_status s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void add_once(std::vector<moegrad_status>& v, moegrad_status s) {
  if (!contains(v, s)) v.push_back(s);
}

std::string statuses_string(const std::vector<moegrad_status>& v) {
  std::string s;
  for (moegrad_status x : v) s += (s.empty() ? "" : " | ") + std::string(moegrad_status_string(x));
  return s.empty() ? "MOEGRAD_STATUS_SUCCESS" : s;
}

// moegrad_layer.h: an output's dimensions of more than one element,
// smallest stride first, must each step past the span (stride x (shape -
// 1)) of the smaller ones; so no stride is zero or negative and no two
// elements share an address. (As for grad-x's grad_x.)
bool output_layout_valid(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, shape) of the dimensions that step
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1) dims.emplace_back(strides[d], shape[d]);
  std::sort(dims.begin(), dims.end());
  int64_t span = 0;
  for (const auto& [stride, n] : dims) {
    if (stride <= span) return false;
    span += stride * (n - 1);  // small: the case's strides are
  }
  return true;
}

// This CPU has AVX512_BF16 (and the AVX-512 subsets the library's check
// asks for with it), read from the compiler's CPUID model.
bool cpu_has_avx512bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

// moegrad_layer.h: the GEMMs of bf16 inputs in the fast bf16 mode need the
// context's ISA to be scalar (the emulation) or avx512 with AVX512_BF16;
// routing and the scatter-add ignore the mode.
bool fast_bf16_refused(const Case& c, const moegrad_context* plan_ctx) {
  if (!c.gemm() || !c.fast_bf16 || !same_dtype(c.dtype, kBF16)) return false;
  moegrad_isa isa = MOEGRAD_ISA_AUTO;
  if (moegrad_context_get_isa(plan_ctx, &isa) != MOEGRAD_STATUS_SUCCESS) return true;
  if (isa == MOEGRAD_ISA_SCALAR) return false;
  return !(isa == MOEGRAD_ISA_AVX512 && cpu_has_avx512bf16());
}

// What planning refuses in a case without a fault: an output layout that
// may overlap, accumulating into a 16-bit grad_weight, a fast bf16 mode the
// plan's ISA cannot run.
std::vector<moegrad_status> plan_violations(const Case& c, bool fast_refused) {
  std::vector<moegrad_status> out;
  for (int t = 0; t < c.num_slots; ++t)
    if (c.slot[t].is_output() && !output_layout_valid(c.slot[t].elements().shape(), c.slot[t].elements().strides()))
      add_once(out, MOEGRAD_STATUS_BAD_LAYOUT);
  if (c.op == LayerOp::kGroupedMatmulWeightGrad && c.accumulate && !same_dtype(c.out_dtype, kF32))
    add_once(out, MOEGRAD_STATUS_ACCUMULATE_NEEDS_F32);
  if (fast_refused) add_once(out, MOEGRAD_STATUS_ISA_UNAVAILABLE);
  return out;
}

std::vector<int64_t> read_ints(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t e = 0; e < v.size(); ++e) v[e] = t.get_int(t.offset_of_linear(static_cast<int64_t>(e)));
  return v;
}

// Widened exactly (NaNs stay NaNs, payloads aside: no output keeps one).
std::vector<float> read_floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t e = 0; e < v.size(); ++e) v[e] = static_cast<float>(t.get(t.offset_of_linear(static_cast<int64_t>(e))));
  return v;
}

// What the run checks, once planned: the expert ids, group list or index.
std::vector<moegrad_status> content_violations(const Case& c) {
  switch (c.op) {
    case LayerOp::kMoeInitRouting: {
      for (int64_t e : read_ints(c.elements("expert_idx")))
        if (e < 0 || e >= c.G) return {MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE};
      return {};
    }
    case LayerOp::kMoeInitRoutingGrad:
      return row_idx_violations(read_ints(c.elements("expanded_row_idx")), c.row_idx_type, c.M, c.slots());
    default:
      return group_list_violations(read_ints(c.elements("group_list")), c.group_list_type, c.M);
  }
}

// The statuses a correct implementation may return, in the order the
// phases imply: NULL out-pointers; the fault, or what planning refuses;
// run-time misuse; contents.
std::vector<moegrad_status> expected_statuses(const Case& c, bool fast_refused, size_t workspace_bytes,
                                              bool* may_succeed) {
  *may_succeed = false;
  if (c.misuse == OpMisuse::kNullSizeOut || c.misuse == OpMisuse::kNullExecutorOut)
    return {MOEGRAD_STATUS_NULL_POINTER};
  if (c.fault == Fault::kNullArgs) return c.fault_statuses;
  std::vector<moegrad_status> out = plan_violations(c, fast_refused);
  if (c.fault != Fault::kNone) {
    for (moegrad_status s : c.fault_statuses) add_once(out, s);
    return out;
  }
  if (!out.empty()) return out;
  const bool has_workspace = workspace_bytes > 0;
  switch (c.misuse) {
    case OpMisuse::kNullExecutor: return {MOEGRAD_STATUS_NULL_POINTER};
    case OpMisuse::kWorkspaceTooSmall: if (has_workspace) return {MOEGRAD_STATUS_WORKSPACE_TOO_SMALL}; break;
    case OpMisuse::kNullWorkspace: if (has_workspace) return {MOEGRAD_STATUS_NULL_POINTER}; break;
    case OpMisuse::kWorkspaceOverlap: if (has_workspace) return {MOEGRAD_STATUS_ALIASING}; break;
    default: break;  // none, run-twice and wrong-kind: the (first) real run meets the contents
  }
  out = content_violations(c);
  *may_succeed = out.empty();
  return out;
}

// Every output's allocation, inputs' storage and num_rows, as they are.
struct Snapshot {
  std::vector<std::byte> bytes[kMaxSlots];
  int64_t num_rows_box[3] = {};
};

Snapshot snapshot(const Case& c) {
  Snapshot s;
  for (int t = 0; t < c.num_slots; ++t)
    s.bytes[t] = c.slot[t].is_output() ? c.slot[t].output->snapshot() : c.slot[t].input->snapshot();
  std::memcpy(s.num_rows_box, c.num_rows_box, sizeof s.num_rows_box);
  return s;
}

// "" if no input byte changed and (all_outputs) no output byte or
// num_rows, or (else) no output byte outside the elements and neither guard
// of num_rows.
std::string check_unchanged(const Case& c, const Snapshot& before, bool all_outputs) {
  for (int t = 0; t < c.num_slots; ++t) {
    const Slot& s = c.slot[t];
    if (!s.is_output()) {
      if (s.input->snapshot() != before.bytes[t]) return std::string("input ") + s.spec.name + " was modified";
    } else if (all_outputs) {
      if (s.output->snapshot() != before.bytes[t]) return std::string("output ") + s.spec.name + " was written";
    } else if (std::string u = s.output->check_outside_elements(before.bytes[t]); !u.empty()) {
      return std::string("output ") + s.spec.name + ": " + u;
    }
  }
  if (c.num_rows_box[0] != before.num_rows_box[0] || c.num_rows_box[2] != before.num_rows_box[2] ||
      (all_outputs && c.num_rows_box[1] != before.num_rows_box[1]))
    return all_outputs ? "num_rows (or the bytes around it) was written" : "the bytes around num_rows were written";
  return "";
}

// MXCSR's control bits (rounding, FTZ, DAZ, exception masks), not its
// sticky flags: a call must leave them as it found them, or the references
// computed after it (std::fma on this thread) would round as it left them.
unsigned mxcsr_controls() { return _mm_getcsr() & ~0x3Fu; }

OpRunResult call(const Case& c, const OpRunOptions& opt) {
  switch (c.op) {
    case LayerOp::kMoeInitRouting: return run_layer_op(c.null_args ? nullptr : &c.routing, opt);
    case LayerOp::kGroupedMatmul: return run_layer_op(c.null_args ? nullptr : &c.matmul, opt);
    case LayerOp::kGroupedMatmulWeightGrad: return run_layer_op(c.null_args ? nullptr : &c.weight_grad, opt);
    default: return run_layer_op(c.null_args ? nullptr : &c.routing_grad, opt);
  }
}

// The bits an f32 result is stored as in `out`.
uint64_t store_bits(DLDataType out, float v) {
  if (same_dtype(out, kF16)) return store_f16_bits(v);
  if (same_dtype(out, kBF16)) return store_bf16_bits(v);
  return store_f32_bits(v);
}

std::string index_string(const Tensor& t, int64_t linear) {
  std::string s;
  for (size_t d = t.shape().size(); d-- > 0;) {
    s = std::to_string(linear % t.shape()[d]) + (s.empty() ? "" : ", ") + s;
    linear /= t.shape()[d];
  }
  return "[" + s + "]";
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Every element of an output against `want` (row-major element bits). An
// element still holding the sentinel where the definition gives something
// else was never written.
std::string compare_output(const Slot& s, const std::vector<uint64_t>& want) {
  const Tensor& t = s.output->elements();
  for (int64_t e = 0; e < t.numel(); ++e) {
    const uint64_t got = t.get_bits(t.offset_of_linear(e)), w = want[static_cast<size_t>(e)];
    if (got == w) continue;
    if (got == s.output->sentinel())
      return std::string(s.spec.name) + index_string(t, e) + " was not written (still the sentinel " + hex(got) +
             "; the definition gives " + hex(w) + ")";
    return std::string(s.spec.name) + index_string(t, e) + " = " + hex(got) + ", the definition gives " + hex(w);
  }
  return "";
}

std::vector<uint64_t> index_bits(const std::vector<int64_t>& values, DLDataType t) {
  const uint64_t mask = t.bits == 32 ? 0xffffffffu : ~uint64_t{0};
  std::vector<uint64_t> bits(values.size());
  for (size_t e = 0; e < values.size(); ++e) bits[e] = static_cast<uint64_t>(values[e]) & mask;
  return bits;
}

std::vector<uint64_t> stored(DLDataType out, const std::vector<float>& v) {
  std::vector<uint64_t> bits(v.size());
  for (size_t e = 0; e < v.size(); ++e) bits[e] = store_bits(out, v[e]);
  return bits;
}

// |got - ref| <= terms * (2^-24 * sum|terms| + 2^-150) for the f32 chain
// (README, "Determinism and precision"), plus half an ulp of an f16 / bf16
// output's one rounding (2^-25 absolute in f16's subnormal range).
std::string check_bound(const Slot& s, const Sums64& ref) {
  const Tensor& t = s.output->elements();
  const bool f16 = same_dtype(t.dtype(), kF16), bf16 = same_dtype(t.dtype(), kBF16);
  const double out_rel = f16 ? std::ldexp(1.0, -11) : bf16 ? std::ldexp(1.0, -8) : 0.0;
  const double out_abs = f16 ? std::ldexp(1.0, -25) : 0.0;
  for (int64_t e = 0; e < t.numel(); ++e) {
    const size_t i = static_cast<size_t>(e);
    const double got = t.get(t.offset_of_linear(e));
    const double terms = static_cast<double>(std::max<int64_t>(ref.terms[i], 1));
    const double chain = terms * (std::ldexp(ref.abs_sum[i], -24) + std::ldexp(1.0, -150));
    const double tol = chain + out_rel * (std::fabs(ref.value[i]) + chain) + out_abs;
    if (!(std::fabs(got - ref.value[i]) <= tol)) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "%s%s = %.9g, float64 reference %.17g, bound %.3g", s.spec.name,
                    index_string(t, e).c_str(), got, ref.value[i], tol);
      return buf;
    }
  }
  return "";
}

// A successful call's outputs against the definitions.
std::string check_results(const Case& c) {
  const bool finite_inputs = c.values != Values::kRawBits;
  switch (c.op) {
    case LayerOp::kMoeInitRouting: {
      const Tensor& x = c.elements("x");
      const RoutingReference ref =
          reference_routing(read_ints(c.elements("expert_idx")), c.G, c.active_num, c.capacity);
      // Rows i < M are token pos_i / top_k's, bit for bit; rows up to R zeros.
      std::vector<uint64_t> ex(static_cast<size_t>(c.R * c.K), 0);
      for (int64_t i = 0; i < ref.M; ++i)
        for (int64_t k = 0; k < c.K; ++k)
          ex[static_cast<size_t>(i * c.K + k)] = x.get_bits(x.offset({ref.pos[static_cast<size_t>(i)] / c.top_k, k}));
      std::vector<int64_t> idx;
      if (c.row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL) {
        idx.assign(static_cast<size_t>(c.R), -1);
        std::copy(ref.pos.begin(), ref.pos.end(), idx.begin());
      } else {
        idx.assign(static_cast<size_t>(c.slots()), -1);
        for (int64_t i = 0; i < ref.M; ++i) idx[static_cast<size_t>(ref.pos[static_cast<size_t>(i)])] = i;
      }
      if (std::string d = compare_output(c.slot[2], ex); !d.empty()) return d;
      if (std::string d = compare_output(c.slot[3], index_bits(idx, c.idx_dtype)); !d.empty()) return d;
      if (std::string d = compare_output(c.slot[4], index_bits(ref.counts, c.gl_dtype)); !d.empty()) return d;
      if (!c.num_rows_null && c.num_rows_box[1] != ref.M)
        return "num_rows = " + std::to_string(c.num_rows_box[1]) +
               ", the definition gives M = " + std::to_string(ref.M);
      return "";
    }
    case LayerOp::kMoeInitRoutingGrad: {
      const std::vector<float> d = read_floats(c.elements("grad_expanded_x"));
      const std::vector<int64_t> token =
          token_of_rows(read_ints(c.elements("expanded_row_idx")), c.row_idx_type, c.M, c.top_k);
      if (std::string e = compare_output(c.slot[2], stored(kF32, scatter_add_reference(d, token, c.batch, c.K)));
          !e.empty())
        return e;
      return finite_inputs ? check_bound(c.slot[2], scatter_add_f64(d, token, c.batch, c.K)) : "";
    }
    default:
      break;
  }
  const std::vector<float> x = read_floats(c.elements("x"));
  const std::vector<int64_t> starts = group_starts(read_ints(c.elements("group_list")), c.group_list_type);
  const GemmChain chain =
      c.fast_bf16 && same_dtype(c.dtype, kBF16) ? GemmChain::kFastBf16Pairs : GemmChain::kFma;
  const Slot& out = c.slot[3];
  if (c.op == LayerOp::kGroupedMatmul) {
    const std::vector<float> w = read_floats(c.elements("weight"));
    const std::vector<float> y = grouped_matmul_reference(x, w, starts, c.K, c.N, chain);
    if (std::string e = compare_output(out, stored(c.out_dtype, y)); !e.empty()) return e;
    return finite_inputs ? check_bound(out, grouped_matmul_f64(x, w, starts, c.K, c.N)) : "";
  }
  const std::vector<float> gy = read_floats(c.elements("grad_y"));
  std::vector<float> gw = weight_grad_reference(x, gy, starts, c.K, c.N, chain);
  Sums64 bound = finite_inputs ? weight_grad_f64(x, gy, starts, c.K, c.N) : Sums64{};
  if (c.accumulate) {  // grad_weight + c: one f32 add to what the (f32) output held
    const std::vector<uint64_t>& held = out.output->initial();
    for (size_t e = 0; e < gw.size(); ++e) {
      const auto bits = static_cast<uint32_t>(held[e]);
      float old;
      std::memcpy(&old, &bits, sizeof old);
      gw[e] = old + gw[e];
      if (finite_inputs) {
        bound.value[e] += old;
        bound.abs_sum[e] += std::fabs(old);
        ++bound.terms[e];
      }
    }
  }
  if (std::string e = compare_output(out, stored(c.out_dtype, gw)); !e.empty()) return e;
  return finite_inputs ? check_bound(out, bound) : "";
}

// moe_init_routing_max_rows for the case's sizes and limits: R, or the
// status planning gives the limits.
std::string check_max_rows(const Case& c) {
  int64_t rows = -7;
  const moegrad_status s =
      moegrad_moe_init_routing_max_rows(c.batch, c.top_k, c.G, c.routing.active_num, c.routing.capacity, &rows);
  const moegrad_status want = c.routing.active_num < -1 ? MOEGRAD_STATUS_BAD_ACTIVE_NUM
                              : c.routing.capacity < -1 ? MOEGRAD_STATUS_BAD_CAPACITY
                                                        : MOEGRAD_STATUS_SUCCESS;
  if (s != want)
    return std::string("moegrad_moe_init_routing_max_rows: ") + moegrad_status_string(s) + ", want " +
           moegrad_status_string(want);
  if (s == MOEGRAD_STATUS_SUCCESS && rows != c.R)
    return "moegrad_moe_init_routing_max_rows gave " + std::to_string(rows) +
           ", the definition R = " + std::to_string(c.R);
  return "";
}

// Outputs back to what they held before the call, num_rows too.
void reset_outputs(Case& c) {
  for (int t = 0; t < c.num_slots; ++t)
    if (c.slot[t].is_output()) c.slot[t].output->reset();
  c.num_rows_box[0] = c.num_rows_box[1] = c.num_rows_box[2] = kNumRowsGuard;
}

std::string same_outputs(const Case& c, const Snapshot& want) {
  for (int t = 0; t < c.num_slots; ++t)
    if (c.slot[t].is_output() && c.slot[t].output->snapshot() != want.bytes[t])
      return std::string("output ") + c.slot[t].spec.name + " differs";
  if (c.num_rows_box[1] != want.num_rows_box[1]) return "num_rows differs";
  return "";
}

std::string check_case(Case& c) {
  const Snapshot before = snapshot(c);
  const unsigned mxcsr = mxcsr_controls();
  if (c.op == LayerOp::kMoeInitRouting)
    if (std::string m = check_max_rows(c); !m.empty()) return m + "; " + ops::describe_ops_case(c);

  OpRunOptions opt;
  opt.plan_ctx = shared_context(c.isa, c.threads, c.fast_bf16);
  opt.run_ctx = shared_context(MOEGRAD_ISA_AUTO, 1);  // one thread: a deterministic schedule for the fuzzer
  opt.one_shot = c.one_shot;
  opt.misalign = c.misalign;
  opt.ws_fill = c.ws_fill;
  opt.misuse = c.misuse;
  opt.overlap_first = c.overlap_first;
  opt.overlap_last = c.overlap_last;
  opt.overlap_placement = c.overlap_placement;
  opt.after_wrong_kind = [&] { return check_unchanged(c, before, true); };
  const OpRunResult r = call(c, opt);
  if (mxcsr_controls() != mxcsr) return "the call changed MXCSR's controls: " + ops::describe_ops_case(c);

  bool may_succeed = false;
  const std::vector<moegrad_status> expected =
      expected_statuses(c, fast_bf16_refused(c, opt.plan_ctx), r.workspace_bytes, &may_succeed);
  const std::string what = ops::describe_ops_case(c) + ": got " + r.describe();
  // (Planning refused: the wrong function was never called.)
  if (c.misuse == OpMisuse::kWrongKind && std::strcmp(r.phase, "plan") != 0 &&
      r.wrong_kind_status != MOEGRAD_STATUS_EXECUTOR_KIND)
    return std::string("another operator's run function gave ") + moegrad_status_string(r.wrong_kind_status) +
           ", want MOEGRAD_STATUS_EXECUTOR_KIND; " + what;
  if (!r.after_wrong_kind.empty()) return "after another operator's run function: " + r.after_wrong_kind + "; " + what;

  // A second run of an executor must fail with EXECUTOR_USED and leave the
  // first run's (checked below) results in place.
  const bool wrote = r.ok() || (c.misuse == OpMisuse::kRunTwice && r.first_run_ok);
  if (c.misuse == OpMisuse::kRunTwice && r.first_run_ok && r.status != MOEGRAD_STATUS_EXECUTOR_USED)
    return "second run of an executor: " + what;
  if (!wrote) {
    if (r.ok() || !contains(expected, r.status))
      return "unexpected status, want " + statuses_string(expected) + "; " + what;
    if (r.message.empty() || r.message.find('\n') != std::string::npos)
      return "failure message must be one non-empty line: " + what;
    if (std::string u = check_unchanged(c, before, true); !u.empty()) return "refused call: " + u + "; " + what;
    return "";
  }
  if (!may_succeed) return "call succeeded, want " + statuses_string(expected) + "; " + what;
  if (r.ok() && std::strcmp(moegrad_last_error_message(), "") != 0)
    return std::string("last error message after a success: \"") + moegrad_last_error_message() + "\"; " + what;
  if (std::string u = check_unchanged(c, before, false); !u.empty()) return u + "; " + what;
  if (std::string d = check_results(c); !d.empty()) return d + "; " + what;

  // The same bytes again: planned on the scalar path (in the fast bf16
  // mode its emulation, which the hardware must match bit for bit) for
  // other threads, and run on them, with another workspace; then through
  // the other call form (two phases or one shot) on the planned path, on
  // as many threads as it was planned for.
  const Snapshot first = snapshot(c);
  const int32_t other_threads = 1 + c.threads % 3;
  reset_outputs(c);
  OpRunOptions scalar;
  scalar.plan_ctx = shared_context(MOEGRAD_ISA_SCALAR, other_threads, c.fast_bf16);
  scalar.run_ctx = shared_context(MOEGRAD_ISA_AUTO, other_threads);
  scalar.misalign = (c.misalign + 17) % 64;
  scalar.ws_fill = {0x3C, 0xFF, 0x00};
  if (const OpRunResult r2 = call(c, scalar); !r2.ok()) return "scalar rerun failed: " + r2.describe() + "; " + what;
  if (std::string d = same_outputs(c, first); !d.empty())
    return "the scalar path on " + std::to_string(other_threads) + " threads: " + d + "; " + what;
  reset_outputs(c);
  OpRunOptions other_form;
  other_form.plan_ctx = opt.plan_ctx;
  other_form.run_ctx = shared_context(MOEGRAD_ISA_AUTO, c.threads);
  other_form.one_shot = !opt.one_shot;
  other_form.misalign = (c.misalign + 33) % 64;
  other_form.ws_fill = {0xC3};
  if (const OpRunResult r3 = call(c, other_form); !r3.ok()) return "rerun failed: " + r3.describe() + "; " + what;
  if (std::string d = same_outputs(c, first); !d.empty())
    return std::string(other_form.one_shot ? "the one-shot call" : "two phases") + " on " +
           std::to_string(c.threads) + " threads: " + d + "; " + what;
  if (mxcsr_controls() != mxcsr) return "a rerun changed MXCSR's controls: " + what;
  return "";
}

}  // namespace

void prepare_ops_contexts() {
  for (moegrad_isa isa : {MOEGRAD_ISA_AUTO, MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    if (!moegrad_isa_available(isa)) continue;
    for (int32_t threads = 1; threads <= 3; ++threads)
      for (bool fast_bf16 : {false, true}) shared_context(isa, threads, fast_bf16);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // pool threads reach their wait
}

std::string check_ops_input(const uint8_t* data, size_t size) {
  Case c;
  ops::decode_ops_case(data, size, c);
  return check_case(c);
}

std::string describe_ops_input(const uint8_t* data, size_t size) {
  Case c;
  ops::decode_ops_case(data, size, c);
  return ops::describe_ops_case(c);
}

}  // namespace mgh