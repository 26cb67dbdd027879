// Test support for the layer operators (moegrad_layer.h), on top of the
// shared tests/support: tensors filled with values exact in their dtype,
// an independent routing reference, float64 GEMM references, and one call
// helper for every operator (two phases with a dirty, misaligned workspace,
// or one shot).
#pragma once

#include <moegrad/moegrad_layer.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "host_tensor.h"
#include "runner.h"

namespace mgt::ops {

enum class Fill {
  kSmallInt,  // integers in [-3, 3]: products and short sums are exact in f32
  kUniform,   // |v| < 2 with a full mantissa (rounded to the dtype)
  kNonFinite,  // kUniform's, with 1/64 NaNs (random sign and payload, quiet or
               // signalling), 1/64 infinities and 1/64 zeros (so inf * 0 occurs)
};

// A tensor of `shape` (strides in elements; empty: compact) filled with
// values exactly representable in t; bytes outside the view keep the sentinel.
HostTensor float_tensor(DType t, std::vector<int64_t> shape, Fill fill, uint64_t seed,
                        std::vector<int64_t> strides = {});
// An index tensor with the row-major logical `values`.
HostTensor index_tensor(IndexDType t, std::vector<int64_t> shape, const std::vector<int64_t>& values,
                        std::vector<int64_t> strides = {});
// A sentinel-filled (NaN) output.
HostTensor output_tensor(DLDataType t, std::vector<int64_t> shape, std::vector<int64_t> strides = {});

// Row-major logical contents.
std::vector<double> float_values(const HostTensor& t);
std::vector<int64_t> index_values(const HostTensor& t);
std::vector<uint64_t> bit_values(const HostTensor& t);

// Strides of a [d0, d1, d2] view of a buffer stored with its dimensions in
// `order` (outermost first), e.g. {0, 2, 1}: a [G, N, K] buffer seen as [G, K, N].
std::vector<int64_t> permuted_strides(const std::vector<int64_t>& shape, const std::vector<int>& order);

// batch x top_k experts in [0, G) avoiding `empty`; distinct per token when possible.
std::vector<int64_t> random_experts(int64_t batch, int64_t top_k, int64_t G, uint64_t seed,
                                    const std::vector<int64_t>& empty = {});

// moe_init_routing from its definition, by std::stable_sort and counting.
struct RefRouting {
  std::vector<int64_t> pos;     // [M]: original position of each kept expanded row
  std::vector<int64_t> counts;  // [G]
  int64_t M = 0, R = 0;
};
RefRouting reference_routing(const std::vector<int64_t>& experts, int64_t top_k, int64_t G, int64_t active_num,
                             int64_t capacity);

// Group starts [G + 1] from counts.
std::vector<int64_t> starts_of(const std::vector<int64_t>& counts);

// float64 references and their sums of |terms| (row-major).
struct Ref64 {
  std::vector<double> value, abs_sum;
};
// y[i, n] = sum_k x[i, k] w[g(i), k, n]
Ref64 reference_grouped_matmul(const HostTensor& x, const HostTensor& w, const std::vector<int64_t>& counts);
// dw[g, k, n] = sum_{i in g} x[i, k] gy[i, n]
Ref64 reference_weight_grad(const HostTensor& x, const HostTensor& gy, const std::vector<int64_t>& counts);
// gx[b, k] = sum over rows i of token b of d[i, k]; owner[i] = token or -1
Ref64 reference_scatter_add(const HostTensor& d, const std::vector<int64_t>& owner, int64_t batch);

// |got - ref| <= terms * 2^-24 * abs_sum + out_rel * |ref| elementwise
// (out_rel: the half-ulp of a final f16/bf16 rounding, else 0).
::testing::AssertionResult within_bound(const HostTensor& got, const Ref64& ref, int64_t terms, double out_rel,
                                        const std::string& context);
// Bitwise equality of the logical elements; names the first difference.
::testing::AssertionResult same_bits(const HostTensor& got, const HostTensor& want, const std::string& context);

// Half an ulp of rounding to t, relative (0 for f32 outputs).
double rounding_rel(DType t);

// One call of any operator: plan + run (workspace filled with 0xA5 and
// misaligned by 3 bytes) on ctx, or the one-shot call.
template <typename Args>
Outcome call(const Args& args, const moegrad_context* ctx, bool one_shot = false);

// "isa=avx2 threads=3"
std::string run_label(moegrad_isa isa, int32_t threads);

}  // namespace mgt::ops
