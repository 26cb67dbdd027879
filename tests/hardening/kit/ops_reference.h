// Independent oracles for the layer operators (moegrad_layer.h), written
// from the header's definitions over plain row-major arrays (the fuzz case
// reads the tensors into them), never by calling the library:
//  * reference_routing: moe_init_routing's stable sort of the slots by
//    expert (ties by position p = b * top_k + j), capacity, then active_num;
//  * the GEMMs' chains, one fp32 FMA per term in ascending order from +0.0
//    (SPEC §5), or the fast bf16 mode's pairs (tests/support/fast_bf16_chain.h),
//    and the scatter-add's ((0 + d[i1]) + d[i2]) + ... over ascending rows;
//  * the same sums in float64 with their sums of |terms|, for a bound;
//  * the stores: every NaN the canonical one, an f16 / bf16 output the f32
//    value rounded once to nearest even;
//  * the statuses that group-list and index contents allow.
#pragma once

#include <moegrad/moegrad.h>

#include <cstdint>
#include <vector>

namespace mgh {

struct RoutingReference {
  std::vector<int64_t> pos;     // [M]: original position p of each kept expanded row
  std::vector<int64_t> counts;  // [G]: kept rows of each expert
  int64_t M = 0, R = 0;
};

// experts[p]: slot p's expert, each in [0, G); a limit of -1 is none.
RoutingReference reference_routing(const std::vector<int64_t>& experts, int64_t G, int64_t active_num,
                                   int64_t capacity);
// R = min(slots, active_num, G * capacity) over the limits that are set.
int64_t routing_rows(int64_t slots, int64_t G, int64_t active_num, int64_t capacity);

// SPEC §4.6: what a group list of counts (or cumsums) breaks for M rows;
// empty if nothing. More than one where several rules are broken: the order
// of the checks is not part of the contract.
std::vector<moegrad_status> group_list_violations(const std::vector<int64_t>& group_list, int32_t group_list_type,
                                                  int64_t M);
// Where each expert's rows start, [G + 1] (a valid group list).
std::vector<int64_t> group_starts(const std::vector<int64_t>& group_list, int32_t group_list_type);

// SPEC §4.8: what expanded_row_idx contents break (M rows, batch*top_k slots).
std::vector<moegrad_status> row_idx_violations(const std::vector<int64_t>& idx, int32_t row_idx_type, int64_t M,
                                               int64_t slots);
// SPEC §3: the token of every expanded row, -1 for none (valid contents).
std::vector<int64_t> token_of_rows(const std::vector<int64_t>& idx, int32_t row_idx_type, int64_t M, int64_t top_k);

enum class GemmChain { kFma, kFastBf16Pairs };

// y[i, n] = chain over k of x[i, k] * w[g(i), k, n]; x [M, K], w [G, K, N].
std::vector<float> grouped_matmul_reference(const std::vector<float>& x, const std::vector<float>& w,
                                            const std::vector<int64_t>& starts, int64_t K, int64_t N,
                                            GemmChain chain);
// c[g, k, n] = chain over the expert's rows i of x[i, k] * grad_y[i, n]
// (pairs counted from the expert's first row); +0.0 for an empty expert.
std::vector<float> weight_grad_reference(const std::vector<float>& x, const std::vector<float>& grad_y,
                                         const std::vector<int64_t>& starts, int64_t K, int64_t N, GemmChain chain);
// grad_x[b, k] = ((0 + d[i1, k]) + d[i2, k]) + ... over token b's rows i1 < i2 < ...
std::vector<float> scatter_add_reference(const std::vector<float>& d, const std::vector<int64_t>& token,
                                         int64_t batch, int64_t K);

// The same sums in float64, each with the sum of its terms' magnitudes and
// their number (the roundings an f32 chain makes).
struct Sums64 {
  std::vector<double> value, abs_sum;
  std::vector<int64_t> terms;
};
Sums64 grouped_matmul_f64(const std::vector<float>& x, const std::vector<float>& w, const std::vector<int64_t>& starts,
                          int64_t K, int64_t N);
Sums64 weight_grad_f64(const std::vector<float>& x, const std::vector<float>& grad_y,
                       const std::vector<int64_t>& starts, int64_t K, int64_t N);
Sums64 scatter_add_f64(const std::vector<float>& d, const std::vector<int64_t>& token, int64_t batch, int64_t K);

// The bits a store of an f32 result leaves: NaN as 0x7fc00000 / 0x7e00 /
// 0x7fc0, the 16-bit ones rounded to nearest even (overflow to infinity).
uint32_t store_f32_bits(float v);
uint16_t store_f16_bits(float v);
uint16_t store_bf16_bits(float v);

}  // namespace mgh
