// Validation shared by the layer operators, on top of api/tensor_check.h:
// typed tensor checks, output layouts, aliasing, group lists. Each failure is
// one status and a one-line message naming the tensor and the values.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>

#include "api/tensor_check.h"
#include "common/dtype.h"
#include "common/problem.h"
#include "moegrad/moegrad.h"

namespace moegrad::ops {

// A checked tensor: its layout, rank and element size.
struct Tensor {
  const char* name = "";
  Layout layout;
  int rank = 0;
  int elem_bytes = 0;

  int64_t dim(int d) const { return layout.shape[d]; }
  int64_t stride(int d) const { return layout.stride[d]; }
  const std::byte* data() const { return layout.data; }
};

// check_tensor + the dtype is f32, f16 or bf16.
moegrad_status check_float_tensor(const DLTensor* t, const char* name, int rank, Tensor* out, DType* dtype);
// check_tensor + the dtype is int32 or int64.
moegrad_status check_index_tensor(const DLTensor* t, const char* name, int rank, Tensor* out, bool* is_int64);

// A float output that may be float32 or `input` (the computing dtype).
moegrad_status check_output_dtype(DType out, DType input, const char* name, const char* input_name);

// An output: no two elements share an address, no negative strides.
moegrad_status check_writable(const Tensor& t);

// No output shares a byte with any other tensor in `all` (outputs included).
moegrad_status check_no_aliasing(const Tensor* const* outputs, int num_outputs, const Tensor* const* all, int num_all);

// The names and byte ranges of `all`, for the executor's workspace check.
TensorSpans tensor_spans(const Tensor* const* all, int num_all);

moegrad_status check_group_list_type(int32_t group_list_type);
moegrad_status check_row_idx_type(int32_t row_idx_type);

// 1-D index tensor view.
IndexView index_view(const Tensor& t, bool is_int64);

}  // namespace moegrad::ops

namespace moegrad::ops {

// A 1-D int32/int64 output. An int32 one holds every value written: counts
// and expanded row numbers are at most R, which is a dimension of
// expanded_x and so below 2^31; slot positions, which may pass it, are
// refused at planning where they would.
struct IndexOut {
  void* data = nullptr;
  bool is_int64 = false;
  int64_t stride = 1;

  void set(int64_t i, int64_t value) const {
    if (is_int64) {
      static_cast<int64_t*>(data)[i * stride] = value;
    } else {
      static_cast<int32_t*>(data)[i * stride] = static_cast<int32_t>(value);
    }
  }
};

inline IndexOut index_out(const Tensor& t, bool is_int64) {
  return IndexOut{const_cast<std::byte*>(t.data()), is_int64, t.stride(0)};
}

}  // namespace moegrad::ops
