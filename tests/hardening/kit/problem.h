// A grad-x problem for hardening checks: a routing built the way
// MoeInitRouting would (dropped slots, padding rows, empty experts, ignored
// tail entries), inputs in a chosen memory layout, and the args of one call.
#pragma once

#include <moegrad/moegrad.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tensor.h"

namespace mgh {

enum class Layout : uint8_t {
  kCompact,    // row-major, DLTensor::strides NULL
  kExplicit,   // row-major, strides given
  kPadded,     // row-major with `pad` extra elements per stride step
  kReversed,   // column-major (reversed stride order), padded
  kSwapInner,  // the two innermost dims swapped ([G, N, K] buffer seen as [G, K, N])
  kNegative,   // padded row-major with every stride negated
  kBroadcast,  // stride 0 on dim 0 (inputs only: one row/expert/value shared)
  kOverlap,    // grad_x only: strides that alias elements (invalid)
  kCount
};
const char* layout_name(Layout l);
std::vector<int64_t> layout_strides(Layout l, const std::vector<int64_t>& shape, int64_t pad);

enum class Values : uint8_t {
  kSmallInt,  // integers in [-4, 4]: every product and sum exact, so float64 == f32 bits
  kUniform,   // random values of full mantissa width in [-2, 2]
  kRawBits,   // random bit patterns: NaN, inf, denormals included
};

struct ProblemSpec {
  DLDataType dtype = kF32;
  DLDataType idx_dtype = kI64;
  DLDataType gl_dtype = kI64;
  int64_t batch = 4, top_k = 2, N = 8, K = 8, G = 3;
  int32_t row_idx_type = MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL;
  int32_t group_list_type = MOEGRAD_GROUP_LIST_COUNT;
  int keep_percent = 80;      // routing slots kept; the rest are dropped
  bool padding_rows = true;   // a dropped slot keeps an expanded row that no token owns
  int empty_percent = 25;     // chance that an expert receives no slot
  int64_t tail = 2;           // type 0: junk entries after M; type 1: positions cut from the end
  Layout gy_layout = Layout::kCompact, w_layout = Layout::kCompact, idx_layout = Layout::kCompact,
         gl_layout = Layout::kCompact, gx_layout = Layout::kCompact;
  int64_t pad = 3;
  uint64_t pad_bytes = 0;     // bytes before each tensor's data, reached via byte_offset
  // Element strides that override the layout of a tensor when not empty
  // (any values: zero and negative strides alias or reverse the inputs).
  std::vector<int64_t> gy_strides, w_strides, idx_strides, gl_strides, gx_strides;
  Values values = Values::kSmallInt;
  uint64_t seed = 1;
  std::string describe() const;
};

class Problem {
 public:
  explicit Problem(const ProblemSpec& spec);
  // args point into the tensors: pinned.
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  // The args of a call over this problem's tensors.
  moegrad_grad_x_args args() const { return args_; }
  moegrad_grad_x_args* args_ptr() { return &args_; }

  ProblemSpec spec;
  int64_t M = 0, L = 0;
  Tensor grad_y, weight, idx, group_list, grad_x;

 private:
  moegrad_grad_x_args args_{};
};

// Fills a float tensor's elements with values of the given kind.
void fill_values(Tensor& t, Values v, Rng& rng);

}  // namespace mgh
