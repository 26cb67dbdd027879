// Per-tensor checks shared by grad-x's validation (api/validate.cpp) and the
// layer operators (src/ops): one status and one-line message per failure
// (api/tensor_check.cpp).
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "common/dtype.h"
#include "moegrad/moegrad.h"

namespace moegrad {

inline constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // SPEC §4: dims < 2^31

// Element strides of a tensor (compact row-major when DLPack gives none; a
// one-element dimension's stride beyond +-(2^31 - 1) reads 0).
struct Layout {
  int64_t shape[3] = {0, 0, 0};
  int64_t stride[3] = {0, 0, 0};
  const std::byte* data = nullptr;
};

// What a tensor may hold: floats (f32, f16 or bf16), f32 only (grad_x), or
// indices (int32 or int64).
enum class Elements { kFloat, kF32, kIndex };

// Checks that are the same for every tensor: present, on the CPU, the right
// rank (<= 3), one lane, non-negative dims < 2^31, every element's offset
// representable, and, where its dtype is one of the `elements` ones, its data
// aligned to it (for any other dtype the dtype is the error, which the dtype
// checks name). Fills *out.
moegrad_status check_tensor(const DLTensor* t, const char* name, int rank, Elements elements, Layout* out);

// f32, f16 or bf16 (one lane): true and *out set.
bool is_float_dtype(DLDataType t, DType* out);
// The same, else BAD_DTYPE naming the tensor and its dtype.
moegrad_status check_float_dtype(const DLTensor* t, const char* name, DType* out);

// A DLPack element type as messages name it: "float64", "uint8",
// "bfloat16", "complex64", "bool"; otherwise its code and bits.
struct DTypeText {
  char text[48];
};
DTypeText dtype_text(DLDataType t);

// int32 or int64: true and *is_int64 set (when not NULL).
bool is_index_dtype(DLDataType t, bool* is_int64);
// The same, else BAD_DTYPE naming the tensor.
moegrad_status check_index_dtype(const DLTensor* t, const char* name, bool* is_int64);

// The bytes [first, last] the elements of a checked tensor touch; none when
// a dimension is 0.
struct ByteSpan {
  uintptr_t first = 0, last = 0;
  bool empty = true;
};
ByteSpan byte_span(const Layout& l, int rank, int64_t elem_bytes);

// For an output: with the dimensions of more than one element taken by
// increasing stride, each stride must step past the whole extent of the
// ones before it (which makes every element's address distinct, and no
// stride negative). The first dimension that does not, or -1.
int overlapping_dim(const Layout& l, int rank);

// ALIASING naming both tensors if an output shares a byte with another.
moegrad_status check_disjoint(const char* out_name, const ByteSpan& out, const char* other_name,
                              const ByteSpan& other);

// The tensors of a planned call, by name and byte range, kept by its
// executor: the run writes its workspace while it reads and writes them, so
// the workspace must share no byte with any of them.
struct TensorSpans {
  static constexpr int kMax = 8;  // the most tensors an operator takes
  const char* name[kMax] = {};
  ByteSpan span[kMax];
  int count = 0;

  void add(const char* tensor_name, const ByteSpan& bytes) {
    if (count < kMax) name[count] = tensor_name, span[count++] = bytes;
  }
};

// ALIASING naming the tensor if the workspace bytes [workspace, workspace +
// bytes) that `function` ("grad_x", "grouped_matmul") uses share one with a
// tensor of `tensors`.
moegrad_status check_workspace_apart(const char* function, const void* workspace, size_t bytes,
                                     const TensorSpans& tensors);

}  // namespace moegrad
