#include "api/validate.h"

#include <cinttypes>
#include <cstddef>
#include <cstdint>

#include "api/tensor_check.h"
#include "common/error.h"

namespace moegrad {

moegrad_status validate_grad_x_args(const moegrad_grad_x_args* args, GradXProblem* out, TensorSpans* spans) {
  if (args == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "args is NULL");
  Layout gy, w, idx, gl, gx;
  // §4.1 (with presence, device and layout): ranks.
  if (auto s = check_tensor(args->grad_y, "grad_y", 2, Elements::kFloat, &gy)) return s;
  if (auto s = check_tensor(args->weight, "weight", 3, Elements::kFloat, &w)) return s;
  if (auto s = check_tensor(args->expanded_row_idx, "expanded_row_idx", 1, Elements::kIndex, &idx)) return s;
  if (auto s = check_tensor(args->group_list, "group_list", 1, Elements::kIndex, &gl)) return s;
  if (auto s = check_tensor(args->grad_x, "grad_x", 2, Elements::kF32, &gx)) return s;

  // §4.2 dtypes.
  DType gy_type, w_type;
  if (auto s = check_float_dtype(args->grad_y, "grad_y", &gy_type)) return s;
  if (auto s = check_float_dtype(args->weight, "weight", &w_type)) return s;
  if (gy_type != w_type)
    return fail(MOEGRAD_STATUS_DTYPE_MISMATCH, "grad_y is %s but weight is %s: they must match",
                dtype_name(gy_type), dtype_name(w_type));
  DType gx_type;
  if (!is_float_dtype(args->grad_x->dtype, &gx_type) || gx_type != DType::kF32)
    return fail(MOEGRAD_STATUS_BAD_DTYPE, "grad_x: dtype %s must be float32", dtype_text(args->grad_x->dtype).text);
  bool idx64 = false, gl64 = false;
  if (auto s = check_index_dtype(args->expanded_row_idx, "expanded_row_idx", &idx64)) return s;
  if (auto s = check_index_dtype(args->group_list, "group_list", &gl64)) return s;

  // §4.3 shapes agree.
  const int64_t M = gy.shape[0], N = gy.shape[1];
  const int64_t G = w.shape[0], K = w.shape[1];
  if (w.shape[2] != N)
    return fail(MOEGRAD_STATUS_N_MISMATCH, "grad_y.shape[1]=%" PRId64 " != weight.shape[2]=%" PRId64, N, w.shape[2]);
  if (gl.shape[0] != G)
    return fail(MOEGRAD_STATUS_GROUP_COUNT_MISMATCH, "group_list.shape[0]=%" PRId64 " != weight.shape[0]=%" PRId64 " (G)",
                gl.shape[0], G);
  if (N == 0 || K == 0 || G == 0)
    return fail(MOEGRAD_STATUS_EMPTY_DIMENSION, "N=%" PRId64 ", K=%" PRId64 ", G=%" PRId64 ": each must be >= 1", N, K, G);

  // §4.5 attributes.
  if (args->batch <= 0) return fail(MOEGRAD_STATUS_BAD_BATCH, "batch=%" PRId64 " must be > 0", args->batch);
  if (args->top_k <= 0) return fail(MOEGRAD_STATUS_BAD_TOP_K, "top_k=%" PRId64 " must be > 0", args->top_k);
  if (args->row_idx_type != 0 && args->row_idx_type != 1)
    return fail(MOEGRAD_STATUS_BAD_ROW_IDX_TYPE, "row_idx_type=%d must be 0 (expanded->original) or 1 (original->expanded)",
                args->row_idx_type);
  if (args->group_list_type != 0 && args->group_list_type != 1)
    return fail(MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE, "group_list_type=%d must be 0 (count) or 1 (cumsum)",
                args->group_list_type);
  int64_t slots = 0;
  if (__builtin_mul_overflow(args->batch, args->top_k, &slots))
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "batch*top_k = %" PRId64 "*%" PRId64 " overflows int64",
                args->batch, args->top_k);

  // §4.4 output shape and layout.
  if (gx.shape[0] != args->batch || gx.shape[1] != K)
    return fail(MOEGRAD_STATUS_GRAD_X_SHAPE, "grad_x.shape=[%" PRId64 ", %" PRId64 "] but [batch, K]=[%" PRId64 ", %" PRId64 "]",
                gx.shape[0], gx.shape[1], args->batch, K);
  if (const int d = overlapping_dim(gx, 2); d >= 0) {
    // The caller's strides: validation takes a one-element dimension's
    // stride beyond 2^31 - 1 as 0 (tensor_check.cpp).
    const int64_t* given = args->grad_x->strides != nullptr ? args->grad_x->strides : gx.stride;
    if (gx.stride[d] <= 0)
      return fail(MOEGRAD_STATUS_BAD_LAYOUT, "grad_x strides [%" PRId64 ", %" PRId64 "]: stride[%d] is not positive; "
                  "an output's strides (of dimensions longer than 1) must be", given[0], given[1], d);
    return fail(MOEGRAD_STATUS_BAD_LAYOUT, "grad_x strides [%" PRId64 ", %" PRId64 "]: each must be, smallest first, "
                "beyond the span of the smaller ones (elements would overlap)", given[0], given[1]);
  }

  // §4.7 lengths, before the address checks below: a tensor whose shape
  // is wrong claims bytes it does not own, and its shape is the error.
  const int64_t L = idx.shape[0];
  if (M > slots)
    return fail(MOEGRAD_STATUS_M_EXCEEDS_SLOTS, "M=%" PRId64 " (grad_y rows) > batch*top_k=%" PRId64, M, slots);
  if (args->row_idx_type == 0 && L < M)
    return fail(MOEGRAD_STATUS_INDEX_TOO_SHORT, "row_idx_type=0 needs expanded_row_idx length L=%" PRId64 " >= M=%" PRId64, L, M);
  if (args->row_idx_type == 1 && L > slots)
    return fail(MOEGRAD_STATUS_INDEX_TOO_LONG, "row_idx_type=1 needs expanded_row_idx length L=%" PRId64
                " <= batch*top_k=%" PRId64, L, slots);

  // The driver zeroes and accumulates grad_x while it still reads the
  // inputs: a shared byte would feed partial sums back in.
  TensorSpans all;
  all.add("grad_y", byte_span(gy, 2, dtype_bytes(gy_type)));
  all.add("weight", byte_span(w, 3, dtype_bytes(w_type)));
  all.add("expanded_row_idx", byte_span(idx, 1, idx64 ? 8 : 4));
  all.add("group_list", byte_span(gl, 1, gl64 ? 8 : 4));
  const ByteSpan gx_bytes = byte_span(gx, 2, 4);
  for (int t = 0; t < all.count; ++t)
    if (auto s = check_disjoint("grad_x", gx_bytes, all.name[t], all.span[t])) return s;
  all.add("grad_x", gx_bytes);

  out->dtype = gy_type;
  out->M = M; out->N = N; out->K = K; out->G = G;
  out->batch = args->batch; out->top_k = args->top_k;
  out->row_idx_type = args->row_idx_type;
  out->group_list_type = args->group_list_type;
  out->grad_y = gy.data; out->gy_row = gy.stride[0]; out->gy_col = gy.stride[1];
  out->weight = w.data; out->w_g = w.stride[0]; out->w_k = w.stride[1]; out->w_n = w.stride[2];
  out->row_idx = IndexView{idx.data, idx64, L, idx.stride[0]};
  out->group_list = IndexView{gl.data, gl64, G, gl.stride[0]};
  out->grad_x = reinterpret_cast<float*>(const_cast<std::byte*>(gx.data));
  out->gx_row = gx.stride[0]; out->gx_col = gx.stride[1];
  *spans = all;
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad
