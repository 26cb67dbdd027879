// Checks a layer operator's f32 output (`moegrad bench --op forward |
// weight-grad`) against float64 sums of the same widened inputs, on a
// sample, so that the bench checks moegrad's result whether or not oneDNN
// is there to compare with. Each output element is one f32 fused
// multiply-add chain from +0.0 over `len` terms (the forward: K; the
// weight grad: the expert's rows), whose roundings each err by at most
// 2^-24 of their result or 2^-150 below the normal range:
//   |out - ref| <= len * (2^-24 * sum |terms| + 2^-150)
// (SPEC §5's bound for grad-x, with len for N + top_k). The fast bf16
// mode's pairs are not such a chain: it is checked against the exact mode.
// The widening is the CLI's own (cli/float_formats.h), not the library's.
#pragma once

#include <cstdint>

#include "bench_problem.h"

namespace moegrad::bench {

struct LayerOpReferenceCheck {
  int64_t elements = 0;             // output elements compared
  double max_error_over_bound = 0;  // max |out - ref| / bound; <= 1 passes
  bool within_bound = true;         // a NaN in `out` fails
};

// Up to `samples` rows of the output spread over its rows (the first and
// the last included), every column: of y [M, N] (the forward), or of
// grad_weight [G, K, N] seen as G * K rows (the weight grad; an expert
// without rows must hold zeros there).
LayerOpReferenceCheck check_layer_op_against_float64(const LayerOpProblem& p, const float* out, int64_t samples);

}  // namespace moegrad::bench
