// The decoded form of one fuzz_ops input (ops_case.h): which layer
// operator, its tensors (inputs in exact-size storage, outputs in
// sentinel-guarded allocations), the views and args a call is given, and
// the one structural fault or misuse it carries with the statuses the fault
// allows. decode_ops_case reads the bytes front to back (a short input is a
// small, valid case); the checks are ops_case.cpp's.
#pragma once

#include <moegrad/moegrad_layer.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "guarded_output.h"
#include "ops_runner.h"
#include "problem.h"
#include "tensor.h"

namespace mgh::ops {

// Structural faults: each breaks one rule of moegrad_layer.h in an
// otherwise valid call (statuses that another rule the fault also breaks
// explains are listed as acceptable). Those marked "per operator" pick one
// of the operator's own rules.
enum class Fault : uint8_t {
  kNone,
  kNullArgs,
  kNullTensor,
  kNullShape,
  kNullData,  // on a tensor with elements
  kRank,
  kDtype,  // outside the dtypes its place takes
  kLanes,
  kDevice,
  kNegativeDim,
  kDimTooLarge,
  kStrideOverflow,
  kMisalignedData,
  kByteOffsetWrap,
  kDtypeMismatch,  // an input, or routing's expanded_x, not in x's dtype
  kOutputDtype,    // a float output in a dtype the operator does not write
  kShapeMismatch,  // per operator: a dimension that disagrees with the others
  kEmptyDim,       // per operator: K, N or G of 0 (routing: batch, top_k too)
  kAttribute,      // per operator: an attribute out of its range
  kAliasing,       // an output's bytes meet another tensor's (routing: num_rows's too)
  kCount
};

const char* fault_name(Fault f);

// What a tensor is to its operator.
enum class Role : uint8_t { kFloatIn, kIndexIn, kFloatOut, kIndexOut };

struct SlotSpec {
  const char* name;
  Role role;
  int rank;
};

constexpr int kMaxSlots = 5;  // the most tensors an operator takes

// A DLTensor copy a fault may edit without touching the storage (room for
// one extra dimension).
struct View {
  DLTensor t{};
  int64_t shape[4] = {1, 1, 1, 1};
  int64_t strides[4] = {1, 1, 1, 1};  // the effective strides, even where t.strides is NULL

  void copy(const DLTensor& from, const Tensor& elements) {
    t = from;
    for (size_t d = 0; d < elements.shape().size(); ++d) {
      shape[d] = elements.shape()[d];
      strides[d] = elements.strides()[d];
    }
    t.shape = shape;
    if (t.strides != nullptr) t.strides = strides;
  }
  Extent extent() const {
    return extent_of(std::vector<int64_t>(shape, shape + t.ndim), std::vector<int64_t>(strides, strides + t.ndim));
  }
  bool has_elements() const { return !extent().empty; }
};

struct Slot {
  SlotSpec spec{};
  const DLTensor** arg = nullptr;          // the args field that points at view.t
  std::unique_ptr<Tensor> input;           // an input: storage of exactly its span (after a pad)
  std::unique_ptr<GuardedOutput> output;   // an output: inside a sentinel-filled allocation
  View view;

  bool is_output() const { return output != nullptr; }
  const Tensor& elements() const { return output ? output->elements() : *input; }
};

// One call: what the bytes chose, then what was built from it.
struct Case {
  LayerOp op = LayerOp::kMoeInitRouting;
  Fault fault = Fault::kNone;
  std::string fault_detail;
  std::vector<moegrad_status> fault_statuses;  // what the fault allows
  OpMisuse misuse = OpMisuse::kNone;

  DLDataType dtype = kF32, out_dtype = kF32, idx_dtype = kI64, gl_dtype = kI64, expert_dtype = kI64;
  int32_t row_idx_type = 0, group_list_type = 0;
  bool raw_contents = false, accumulate = false, num_rows_null = false, padding_rows = false;
  Values values = Values::kSmallInt;
  int64_t batch = 1, top_k = 1, G = 1, N = 1, K = 1;
  int keep_percent = 100, empty_percent = 0;
  int64_t tail = 0;
  int64_t capacity = MOEGRAD_NO_LIMIT, active_num = MOEGRAD_NO_LIMIT;
  Layout layout[kMaxSlots] = {};
  std::vector<int64_t> raw_strides[kMaxSlots];
  int64_t pad = 0;
  uint64_t pad_bytes = 0;
  size_t guard_front = 0, guard_back = 0;
  bool data_at_element0 = false;
  bool null_empty_data = false;
  moegrad_isa isa = MOEGRAD_ISA_AUTO;
  bool fast_bf16 = false;
  int32_t threads = 1;
  bool one_shot = false;
  size_t misalign = 0;
  std::vector<uint8_t> ws_fill;
  uint64_t seed = 1;
  uintptr_t overlap_first = 0, overlap_last = 0;  // kWorkspaceOverlap's tensor
  OverlapPlacement overlap_placement = OverlapPlacement::kLastOnFirst;
  std::string overlap_detail;

  // Built from the above: rows M of the GEMMs' x and of grad_expanded_x
  // (routing's are what its reference finds), the index length L,
  // routing's R; the tensors in args order.
  int64_t M = 0, L = 0, R = 0;
  int num_slots = 0;
  Slot slot[kMaxSlots];
  int64_t num_rows_box[3] = {};  // num_rows in the middle, between two guards
  bool null_args = false;
  moegrad_moe_init_routing_args routing{};
  moegrad_grouped_matmul_args matmul{};
  moegrad_grouped_matmul_weight_grad_args weight_grad{};
  moegrad_moe_init_routing_grad_args routing_grad{};

  int64_t slots() const { return batch * top_k; }
  bool gemm() const { return op == LayerOp::kGroupedMatmul || op == LayerOp::kGroupedMatmulWeightGrad; }
  int find(const char* name) const {
    for (int t = 0; t < num_slots; ++t)
      if (std::strcmp(slot[t].spec.name, name) == 0) return t;
    std::fprintf(stderr, "mgh: %s has no tensor %s\n", layer_op_name(op), name);
    std::abort();
  }
  View& view(const char* name) { return slot[find(name)].view; }
  const Tensor& elements(const char* name) const { return slot[find(name)].elements(); }
};

// What num_rows and the int64s either side of it hold before a call.
inline constexpr int64_t kNumRowsGuard = 0x5aa5a55aa55a5aa5;

void decode_ops_case(const uint8_t* data, size_t size, Case& c);
std::string describe_ops_case(const Case& c);

}  // namespace mgh::ops
