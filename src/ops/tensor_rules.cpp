#include "ops/tensor_rules.h"

#include <cinttypes>

#include "common/error.h"

namespace moegrad::ops {

namespace {

moegrad_status check_common(const DLTensor* t, const char* name, int rank, Elements elements, Tensor* out) {
  out->name = name;
  out->rank = rank;
  if (auto s = check_tensor(t, name, rank, elements, &out->layout)) return s;
  out->elem_bytes = (t->dtype.bits + 7) / 8;
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace

moegrad_status check_float_tensor(const DLTensor* t, const char* name, int rank, Tensor* out, DType* dtype) {
  if (auto s = check_common(t, name, rank, Elements::kFloat, out)) return s;
  return check_float_dtype(t, name, dtype);
}

moegrad_status check_index_tensor(const DLTensor* t, const char* name, int rank, Tensor* out, bool* is_int64) {
  if (auto s = check_common(t, name, rank, Elements::kIndex, out)) return s;
  return check_index_dtype(t, name, is_int64);
}

moegrad_status check_output_dtype(DType out, DType input, const char* name, const char* input_name) {
  if (out == DType::kF32 || out == input) return MOEGRAD_STATUS_SUCCESS;
  return fail(MOEGRAD_STATUS_BAD_DTYPE, "%s is %s: it must be float32 or %s's dtype (%s)", name, dtype_name(out),
              input_name, dtype_name(input));
}

moegrad_status check_writable(const Tensor& t) {
  const int d = overlapping_dim(t.layout, t.rank);
  if (d < 0) return MOEGRAD_STATUS_SUCCESS;
  if (t.stride(d) <= 0)
    return fail(MOEGRAD_STATUS_BAD_LAYOUT, "%s: stride[%d]=%" PRId64 " is not positive: an output's strides (of "
                "dimensions longer than 1) must be", t.name, d, t.stride(d));
  return fail(MOEGRAD_STATUS_BAD_LAYOUT, "%s: stride[%d]=%" PRId64 " is not beyond the span of the smaller strides "
              "(elements would overlap)", t.name, d, t.stride(d));
}

moegrad_status check_no_aliasing(const Tensor* const* outputs, int num_outputs, const Tensor* const* all,
                                 int num_all) {
  for (int o = 0; o < num_outputs; ++o) {
    const Tensor& out = *outputs[o];
    const ByteSpan out_bytes = byte_span(out.layout, out.rank, out.elem_bytes);
    for (int a = 0; a < num_all; ++a) {
      const Tensor& other = *all[a];
      if (&other == &out) continue;
      if (auto s = check_disjoint(out.name, out_bytes, other.name, byte_span(other.layout, other.rank, other.elem_bytes)))
        return s;
    }
  }
  return MOEGRAD_STATUS_SUCCESS;
}

TensorSpans tensor_spans(const Tensor* const* all, int num_all) {
  TensorSpans spans;
  for (int a = 0; a < num_all; ++a) spans.add(all[a]->name, byte_span(all[a]->layout, all[a]->rank, all[a]->elem_bytes));
  return spans;
}

moegrad_status check_group_list_type(int32_t group_list_type) {
  if (group_list_type == MOEGRAD_GROUP_LIST_COUNT || group_list_type == MOEGRAD_GROUP_LIST_CUMSUM)
    return MOEGRAD_STATUS_SUCCESS;
  return fail(MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE, "group_list_type=%d must be 0 (count) or 1 (cumsum)",
              group_list_type);
}

moegrad_status check_row_idx_type(int32_t row_idx_type) {
  if (row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL || row_idx_type == MOEGRAD_ROW_IDX_ORIGINAL_TO_EXPANDED)
    return MOEGRAD_STATUS_SUCCESS;
  return fail(MOEGRAD_STATUS_BAD_ROW_IDX_TYPE,
              "row_idx_type=%d must be 0 (expanded->original) or 1 (original->expanded)", row_idx_type);
}

IndexView index_view(const Tensor& t, bool is_int64) {
  return IndexView{t.data(), is_int64, t.dim(0), t.stride(0)};
}

}  // namespace moegrad::ops
