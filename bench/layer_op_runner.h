// The measurements of `moegrad bench --op forward|weight-grad`: for each
// dtype and thread count, moegrad's layer operator and one oneDNN matmul per
// expert, on the same inputs, into outputs of their own. Each runs alone
// first (the checks: moegrad's output bitwise across thread counts,
// oneDNN's within the tolerance of moegrad's); then a dtype's paths of
// every thread count are timed together with the FMA loop, interleaved
// (interleaved_timing.h). Dtypes are timed one after the other, each with
// only its own buffers held: zmoe's weight grad writes two 3.5 GB outputs.
#pragma once

#include <vector>

#include "bench_options.h"
#include "bench_report.h"
#include "bench_runner.h"
#include "fma_peak.h"

namespace moegrad::bench {

// Steps run_layer_op_shape reports to Progress for one shape.
int layer_op_shape_steps(const RunConfig& config);

// op: BenchOp::kForward or BenchOp::kWeightGrad.
ShapeReport run_layer_op_shape(const ShapeSpec& shape, BenchOp op, const RunConfig& config,
                               const std::vector<FmaLoop*>& fma_loops, Progress& progress);

}  // namespace moegrad::bench
