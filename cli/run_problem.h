// The random MoE layer `moegrad run` works on: routing, grad_y and weight
// generated once, plus any number of grad_x outputs to compare.
#pragma once

#include <moegrad/moegrad.h>

#include <cstdint>
#include <optional>

#include "aligned_buffer.h"
#include "float_formats.h"
#include "reference_check.h"
#include "routing.h"

namespace moegrad::cli {

struct RunShape {
  int64_t batch, top_k, experts, k, n;  // each in [1, 2^31); top_k <= experts
  FloatFormat format;
  uint64_t seed;
};

// One grad_x [batch, K] f32, pre-filled with NaN so an element the operator
// never writes fails every comparison.
struct GradXBuffer {
  AlignedBuffer memory;
  DLTensor tensor;
  const float* values() const { return memory.as<float>(); }
};

// Refuses, before anything is allocated, a shape one of whose sizes needs
// more than 64 bits (a usage error) and one whose buffers together, with
// the workspace's tables, exceed the memory available
// (bench::available_memory: MemAvailable or a cgroup's limit; Linux overcommits:
// each allocation could succeed and filling them get the process killed
// part-way, with no message). Throws CliError.
void check_run_shape(const RunShape& shape);
// Refuses a planned workspace (the workers' regions with the tables) that
// exceeds the memory available, called before it is allocated, once the
// inputs and grad_x are: their pages count as used by then. Throws CliError.
void check_workspace_fits(uint64_t workspace_bytes, int32_t threads);

class RunProblem {
 public:
  // Generates everything (all cores for the large buffers). Throws CliError.
  explicit RunProblem(const RunShape& shape);
  RunProblem(const RunProblem&) = delete;  // tensors point at members
  RunProblem& operator=(const RunProblem&) = delete;

  const RunShape& shape() const { return shape_; }
  int64_t m() const { return shape_.batch * shape_.top_k; }  // no slot is dropped
  uint64_t grad_x_bytes() const;

  GradXBuffer make_grad_x(const char* what) const;
  // The operator's arguments, writing into `grad_x` (routing type 0, counts).
  moegrad_grad_x_args args(const GradXBuffer& grad_x) const;
  ReferenceProblem reference() const;

 private:
  RunShape shape_;
  // Declared (so constructed) before routing_: a shape whose tensors cannot
  // be allocated fails at once, not after building a routing that can take
  // a minute and tens of GB (its expert tables grow with G, its row tables
  // with M).
  AlignedBuffer grad_y_;
  AlignedBuffer weight_;
  Routing routing_;
  int64_t grad_y_shape_[2];
  int64_t weight_shape_[3];
  int64_t idx_shape_[1];
  int64_t group_shape_[1];
  int64_t grad_x_shape_[2];
  DLTensor grad_y_t_, weight_t_, idx_t_, group_t_;
};

}  // namespace moegrad::cli
