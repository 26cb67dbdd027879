// One fuzz input for the layer operators (moegrad_layer.h): bytes -> one
// call of moe_init_routing, grouped_matmul, grouped_matmul_weight_grad or
// moe_init_routing_grad (shapes with 0/1 edges and tails, strides, byte
// offsets, dtypes, attributes, index contents, one optional structural
// fault or API misuse, ISA, fast bf16 mode, 1-3 threads) -> the call,
// checked against independent oracles (ops_reference.h):
//  * on success: every output element equals the header's definition bit
//    for bit (routing's gathered rows, index and counts exactly; the GEMMs'
//    FMA chains, or the fast bf16 mode's pair chains; the scatter-add's
//    ascending sums; every NaN canonical, f16/bf16 outputs rounded once),
//    and for finite inputs lies within the float64 bound; no output byte
//    outside its elements, and no input byte, changed; the last error
//    message is ""; a second run on the scalar path and other threads, and
//    a third through the other call form, give the same bytes;
//  * on failure: the status is one the header allows for what was broken,
//    the message is one non-empty line, and no output byte (num_rows
//    included) or input byte changed.
// Shared by fuzz/fuzz_ops.cpp and the corpus replay test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mgh {

// "" if the input passes every check, else what went wrong (with the case).
std::string check_ops_input(const uint8_t* data, size_t size);

// Creates every context the cases use (all ISAs x 1-3 threads x fast bf16
// mode) and lets their pool threads settle, before a fuzzer's first input.
void prepare_ops_contexts();

// The decoded case in words (for reports and the corpus tests).
std::string describe_ops_input(const uint8_t* data, size_t size);

}  // namespace mgh
