#include "run_problem.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>

#include "cli_error.h"
#include "dense_bytes.h"
#include "dl_tensor.h"
#include "gib_text.h"
#include "peak_rss.h"
#include "random_data.h"

namespace moegrad::cli {
namespace {

uint64_t checked_bytes(std::initializer_list<int64_t> dims, uint64_t element_bytes,
                       const char* what) {
  uint64_t bytes = 0;
  if (!dense_bytes(dims, element_bytes, &bytes)) {
    usage_error(std::string("run: the size of ") + what + " overflows 64 bits");
  }
  return bytes;
}

// About the bytes a run holds at once before its non-fused step: grad_y,
// weight, the routing (while it is built, 16 bytes a slot and 24 an
// expert: routing.cpp), two grad_x (the result and the determinism
// rerun's) and the workspace's tables (README: 5 bytes a row, 1 a token,
// 24 an expert). The workers' regions are not known before the plan, and
// check_workspace_fits takes them then: a bound per thread (16 MiB) refused
// a shape of 8 tokens at 4096 threads, whose workspace is 0.3 MB. Each size
// fits in 64 bits (checked first).
uint64_t fused_run_bytes(const RunShape& s) {
  const int64_t m = s.batch * s.top_k;
  const auto element = static_cast<uint64_t>(format_bytes(s.format));
  uint64_t total = 0;
  for (const uint64_t bytes : {checked_bytes({m, s.n}, element, "grad_y"),
                               checked_bytes({s.experts, s.k, s.n}, element, "weight"),
                               checked_bytes({m}, 16 + 5, "the routing and the workspace's row tables"),
                               checked_bytes({s.experts}, 24 + 24, "the routing and the workspace's expert tables"),
                               checked_bytes({s.batch}, 2 * sizeof(float) * static_cast<uint64_t>(s.k) + 1,
                                             "two grad_x and the workspace's token table")})
    if (__builtin_add_overflow(total, bytes, &total)) usage_error("run: the shape's total size overflows 64 bits");
  return total;
}

// Refused before anything is allocated: where the buffers together exceed
// what the kernel says is available, each allocation alone may still
// succeed (Linux overcommits), and filling them would get the process
// killed part-way with no message.
void check_fits_in_memory(const RunShape& s) {
  const uint64_t need = fused_run_bytes(s);
  const std::optional<bench::AvailableMemory> available = bench::memory_short_of(need);
  if (!available) return;
  const auto [need_text, available_text] = gib_texts(need, available->bytes);
  data_error("run: this shape needs about " + need_text +
             " at once (grad_y, weight, the routing, two grad_x, the workspace's tables), more than the " +
             available_text + " available (" + available->source() + "): choose a smaller shape");
}

// Every size the run will allocate fits in 64 bits, checked before the
// routing is built (a few GB for a large batch).
const RunShape& checked_shape(const RunShape& s) {
  const int64_t m = s.batch * s.top_k;  // each < 2^31: no overflow
  if (m > std::numeric_limits<int32_t>::max()) {
    usage_error("run: M = batch * top_k = " + std::to_string(m) + " exceeds 2147483647 (SPEC 4)");
  }
  checked_bytes({m, s.n}, format_bytes(s.format), "grad_y");
  checked_bytes({s.experts, s.k, s.n}, format_bytes(s.format), "weight");
  checked_bytes({s.batch, s.k}, sizeof(float), "grad_x");
  checked_bytes({m, s.k}, sizeof(float), "d_expanded_x (non-fused path)");
  return s;
}

}  // namespace

void check_run_shape(const RunShape& s) { check_fits_in_memory(checked_shape(s)); }

void check_workspace_fits(uint64_t workspace_bytes, int32_t threads) {
  const std::optional<bench::AvailableMemory> available = bench::memory_short_of(workspace_bytes);
  if (!available) return;
  const auto [need_text, available_text] = gib_texts(workspace_bytes, available->bytes);
  data_error("run: the workspace for " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s") +
             " needs " + need_text + ", more than the " + available_text + " available (" + available->source() +
             ") beside the inputs and grad_x: use fewer --threads or a smaller shape");
}


RunProblem::RunProblem(const RunShape& s)
    : shape_(checked_shape(s)),
      grad_y_(checked_bytes({m(), s.n}, format_bytes(s.format), "grad_y"), "grad_y"),
      weight_(checked_bytes({s.experts, s.k, s.n}, format_bytes(s.format), "weight"), "weight"),
      routing_(make_routing(s.batch, s.top_k, s.experts, s.seed)),
      grad_y_shape_{m(), s.n},
      weight_shape_{s.experts, s.k, s.n},
      idx_shape_{m()},
      group_shape_{s.experts},
      grad_x_shape_{s.batch, s.k} {
  const uint64_t gy_count = grad_y_.size() / static_cast<uint64_t>(format_bytes(s.format));
  const uint64_t w_count = weight_.size() / static_cast<uint64_t>(format_bytes(s.format));
  fill_uniform(grad_y_.data(), s.format, gy_count, s.seed, kGradYStream);
  fill_uniform(weight_.data(), s.format, w_count, s.seed, kWeightStream);
  const DLDataType dtype = format_dl_dtype(s.format);
  grad_y_t_ = make_dl_tensor(grad_y_.data(), dtype, grad_y_shape_, 2);
  weight_t_ = make_dl_tensor(weight_.data(), dtype, weight_shape_, 3);
  // DLTensor has no const; the operator only reads its inputs.
  idx_t_ = make_dl_tensor(const_cast<int64_t*>(routing_.expanded_row_idx.data()), {kDLInt, 64, 1},
                          idx_shape_, 1);
  group_t_ = make_dl_tensor(const_cast<int64_t*>(routing_.group_list.data()), {kDLInt, 64, 1},
                            group_shape_, 1);
}

uint64_t RunProblem::grad_x_bytes() const {
  return checked_bytes({shape_.batch, shape_.k}, sizeof(float), "grad_x");
}

GradXBuffer RunProblem::make_grad_x(const char* what) const {
  GradXBuffer out{AlignedBuffer(grad_x_bytes(), what), {}};
  std::fill_n(out.memory.as<float>(), out.memory.size() / sizeof(float),
              std::numeric_limits<float>::quiet_NaN());
  // The shape array is ours and outlives the buffer's use with args().
  out.tensor =
      make_dl_tensor(out.memory.data(), {kDLFloat, 32, 1}, const_cast<int64_t*>(grad_x_shape_), 2);
  return out;
}

moegrad_grad_x_args RunProblem::args(const GradXBuffer& grad_x) const {
  return {&grad_y_t_,
          &weight_t_,
          &idx_t_,
          &group_t_,
          &grad_x.tensor,
          shape_.batch,
          shape_.top_k,
          MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL,
          MOEGRAD_GROUP_LIST_COUNT};
}

ReferenceProblem RunProblem::reference() const {
  return {grad_y_.data(),
          weight_.data(),
          shape_.format,
          routing_.expanded_row_idx.data(),
          routing_.group_list.data(),
          shape_.batch,
          shape_.top_k,
          shape_.experts,
          shape_.k,
          shape_.n,
          m()};
}

}  // namespace moegrad::cli
