// A grad-x problem: routing, input tensors in a chosen layout, and the
// DLTensor/args plumbing of one library call.
#pragma once

#include <moegrad/moegrad.h>

#include <cstdint>
#include <string>

#include "host_tensor.h"
#include "routing.h"

namespace mgt {

enum class Values {
  kUniform,       // |v| in [2^-4, 2), random sign and full-width mantissa
  kSmallInt,      // integers in [-3, 3]: every product and sum is exact in f32
  kWideExponent,  // exponents over a wide range (f16: its whole normal range), some zeros
  kTiny,          // f32/bf16: products in the f32 denormal range; f16: f16 denormal inputs
  kNonFinite,     // kUniform's, with 1/64 NaNs (random sign, payload, quiet or signalling),
                  // 1/64 infinities and 1/32 zeros (so inf * 0 and inf - inf occur)
};
const char* values_name(Values v);

struct ProblemSpec {
  RoutingSpec routing;
  int64_t N = 1;
  int64_t K = 1;
  DType dtype = DType::kF32;
  IndexDType idx_dtype = IndexDType::kI64;
  IndexDType group_list_dtype = IndexDType::kI64;
  int32_t group_list_type = MOEGRAD_GROUP_LIST_COUNT;
  Values values = Values::kUniform;
  uint64_t value_seed = 1;
};

// The sizes every spec sets, for make_spec({.batch = .., .top_k = .., ...}).
struct Dims {
  int64_t batch = 1, top_k = 1, experts = 1, K = 1, N = 1;
};
ProblemSpec make_spec(const Dims& d, int32_t row_idx_type = 0, double keep_ratio = 1.0, uint64_t routing_seed = 1);

// Memory layout of the tensors; the logical values do not depend on it.
struct Layout {
  int64_t grad_y_row_pad = 0;       // grad_y row stride N + pad
  bool grad_y_column_major = false;  // grad_y strides {1, M}
  bool weight_nk_buffer = false;     // a [G, N, K] buffer viewed as [G, K, N]
  bool weight_every_other_n = false;  // every other element of a [G, K, 2N] buffer
  bool weight_g_innermost = false;    // a [K, N, G] buffer viewed as [G, K, N]
  int64_t grad_x_row_pad = 0;        // grad_x row stride K + pad
  bool grad_x_column_major = false;  // grad_x strides {1, batch}
  uint64_t byte_offset = 0;          // DLTensor::byte_offset of every tensor
  bool explicit_strides = false;     // compact tensors with explicit (not NULL) strides
  std::string describe() const;
};

class Problem {
 public:
  explicit Problem(const ProblemSpec& spec, const Layout& layout = {});

  // A fresh grad_x [batch, K] f32 in this problem's layout, sentinel-filled.
  HostTensor make_grad_x() const;
  std::string describe() const;

  ProblemSpec spec;
  Layout layout;
  Routing routing;
  int64_t M, N, K, G, batch, top_k;
  HostTensor grad_y, weight, idx, group_list;
};

// The DLTensor views and args of one call. Tests may edit any field to make
// an invalid call; the object is pinned because args points into it.
struct Call {
  Call(const Problem& p, HostTensor& grad_x_tensor);
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  DLTensor grad_y, weight, idx, group_list, grad_x;
  moegrad_grad_x_args args;
};

// Writes `counts` into group_list as counts or cumulative sums.
void store_group_list(HostTensor& group_list, const std::vector<int64_t>& counts, int32_t group_list_type);

}  // namespace mgt
