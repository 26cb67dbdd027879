// One fuzz input for the operator: bytes -> a grad-x call (shapes, strides,
// dtypes, attributes, index contents, one optional structural fault or API
// misuse) -> the call, checked against independent oracles:
//  * on success: grad_x equals SPEC §5's f32 order bit for bit (every NaN
//    the canonical one), and for small-integer inputs also the float64 reference; a
//    second run on the scalar path (other threads: the first runs on one,
//    this one on as many as its plan was made for, 1-3; another workspace
//    and misalignment) gives the same bits; grad_x's gaps and the inputs
//    are untouched;
//  * on failure: the status is one the SPEC allows for what was broken, the
//    message is one non-empty line, and grad_x and the inputs are untouched.
// Shared by fuzz/fuzz_grad_x.cpp and the corpus replay test, so every corpus
// file (crash regressions included) runs in the ordinary test suite too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mgh {

// "" if the input passes every check, else what went wrong (with the case).
std::string check_grad_x_input(const uint8_t* data, size_t size);

// Creates every context the cases use (all ISAs x 1..4 threads) and lets
// their pool threads settle. A fuzzer calls it once before the first input:
// a pool thread starting up *during* an input would add coverage at a
// timing-dependent moment. (The second run of a valid input has pool
// threads working, whose coverage varies with their timing all the same.)
void prepare_grad_x_contexts();

// The decoded case in words (for reports and corpus notes).
std::string describe_grad_x_input(const uint8_t* data, size_t size);

}  // namespace mgh
