// Independent oracles for grad-x, written from SPEC.md and reading the
// inputs through the DLTensors exactly as the library is given them
// (strides, byte_offset, dtype):
//  * content_violations: SPEC §4.6/§4.8 on the group list and index contents;
//  * reference_contract: SPEC §5's f32 order (fma chain over n from +0.0f,
//    then ((0 + c_i1) + c_i2) + ... over ascending rows), every NaN then the
//    canonical 0x7fc00000 (README, "NaN") - the exact bits;
//  * reference_fast_bf16: the fast bf16 mode's pair order (README, "Fast
//    bf16 mode") in place of the fma chain over n, the rest as above;
//  * reference_f64: the same sums in float64 (exact for small integers).
#pragma once

#include <moegrad/moegrad.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mgh {

// Element (index...) of a DLTensor, widened exactly.
double dl_get(const DLTensor& t, const std::vector<int64_t>& index);
int64_t dl_get_int(const DLTensor& t, int64_t i);
uint32_t dl_get_f32_bits(const DLTensor& t, int64_t i, int64_t j);

// The statuses a correct implementation may return for the group list and
// index *contents* of structurally valid args (empty: the contents are valid).
// More than one when several constraints are broken: the order in which an
// implementation checks them is not part of the contract.
std::vector<moegrad_status> content_violations(const moegrad_grad_x_args& a);

// SPEC §3: the token of every expanded row (-1: none). Valid contents only.
std::vector<int64_t> owner_of_rows(const moegrad_grad_x_args& a);
// Expert of every expanded row, from the group list.
std::vector<int64_t> expert_of_rows(const moegrad_grad_x_args& a);

// Row-major [batch, K].
std::vector<float> reference_contract(const moegrad_grad_x_args& a);
std::vector<float> reference_fast_bf16(const moegrad_grad_x_args& a);
std::vector<double> reference_f64(const moegrad_grad_x_args& a);
std::vector<float> to_float(const std::vector<double>& v);

// grad_x (any strides) read back row-major.
std::vector<float> read_grad_x(const DLTensor& gx);

// "" if equal bit for bit, NaNs included, else a message naming the first
// differing (b, k) and both values.
std::string compare_bits(const std::vector<float>& got, const std::vector<float>& want, int64_t K);

}  // namespace mgh
