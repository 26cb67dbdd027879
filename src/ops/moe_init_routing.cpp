#include "ops/moe_init_routing.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <limits>
#include <utility>

#include "common/error.h"
#include "runtime/parallel_items.h"

namespace moegrad::ops {
namespace {

constexpr int64_t kRowsPerItem = 64;

// Copies one row of n elements of `bytes` each between strided buffers.
void copy_row(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, int64_t n, int bytes) {
  if ((dst_stride == 1 && src_stride == 1) || n == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n * bytes));
    return;
  }
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * dst_stride * bytes, src + j * src_stride * bytes, bytes);
}

}  // namespace

moegrad_status routing_max_rows(int64_t batch, int64_t top_k, int64_t num_experts, int64_t active_num,
                                int64_t capacity, bool from_shapes, int64_t* max_rows) {
  if (batch <= 0)
    return fail(MOEGRAD_STATUS_BAD_BATCH, "batch=%" PRId64 "%s must be > 0", batch, from_shapes ? " (x.shape[0])" : "");
  if (top_k <= 0)
    return fail(MOEGRAD_STATUS_BAD_TOP_K, "top_k=%" PRId64 "%s must be > 0", top_k,
                from_shapes ? " (expert_idx.shape[1])" : "");
  if (num_experts <= 0)
    return fail(MOEGRAD_STATUS_EMPTY_DIMENSION, "%s=%" PRId64 "%s must be >= 1", from_shapes ? "G" : "num_experts",
                num_experts, from_shapes ? " (group_list.shape[0])" : "");
  // Each is a dimension of a tensor the operator takes (x, expert_idx,
  // group_list), which SPEC §4 bounds; from shapes they were checked.
  const std::pair<const char*, int64_t> dims[] = {{"batch", batch}, {"top_k", top_k}, {"num_experts", num_experts}};
  for (const auto& [name, value] : dims) {
    if (value > kMaxDim)
      return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "%s=%" PRId64 " exceeds 2^31-1, a dimension's limit", name, value);
  }
  if (active_num < -1)
    return fail(MOEGRAD_STATUS_BAD_ACTIVE_NUM, "active_num=%" PRId64 " must be -1 (no limit) or >= 0", active_num);
  if (capacity < -1)
    return fail(MOEGRAD_STATUS_BAD_CAPACITY, "capacity=%" PRId64 " must be -1 (no limit) or >= 0", capacity);
  int64_t rows = 0;
  if (__builtin_mul_overflow(batch, top_k, &rows))
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "batch*top_k = %" PRId64 "*%" PRId64 " overflows int64", batch, top_k);
  if (active_num >= 0) rows = std::min(rows, active_num);
  int64_t capped = 0;
  if (capacity >= 0 && !__builtin_mul_overflow(num_experts, capacity, &capped)) rows = std::min(rows, capped);
  // R is expanded_x's first dimension: past SPEC §4's limit no call could
  // pass it (and a caller sizing buffers from R would allocate for nothing).
  if (rows > kMaxDim)
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "R = min(batch*top_k, active_num, G*capacity) = %" PRId64
                " rows: more than a dimension may have (2^31-1); set active_num or capacity", rows);
  *max_rows = rows;
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status MoeInitRoutingOp::init(const moegrad_moe_init_routing_args* args, const OpKernels&,
                                      int workers) {
  if (args == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "moe_init_routing: args is NULL");
  Tensor x, e, ex, idx, gl;
  DType ex_type;
  bool idx64 = false, gl64 = false;
  if (auto s = check_float_tensor(args->x, "x", 2, &x, &dtype_)) return s;
  if (auto s = check_index_tensor(args->expert_idx, "expert_idx", 2, &e, &experts64_)) return s;
  if (auto s = check_float_tensor(args->expanded_x, "expanded_x", 2, &ex, &ex_type)) return s;
  if (auto s = check_index_tensor(args->expanded_row_idx, "expanded_row_idx", 1, &idx, &idx64)) return s;
  if (auto s = check_index_tensor(args->group_list, "group_list", 1, &gl, &gl64)) return s;
  if (ex_type != dtype_)
    return fail(MOEGRAD_STATUS_DTYPE_MISMATCH, "x is %s but expanded_x is %s: they must match", dtype_name(dtype_),
                dtype_name(ex_type));

  batch_ = x.dim(0), K_ = x.dim(1), top_k_ = e.dim(1), G_ = gl.dim(0);
  if (e.dim(0) != batch_)
    return fail(MOEGRAD_STATUS_BATCH_MISMATCH, "expert_idx.shape[0]=%" PRId64 " != x.shape[0]=%" PRId64 " (batch)",
                e.dim(0), batch_);
  if (K_ == 0) return fail(MOEGRAD_STATUS_EMPTY_DIMENSION, "K=0 (x.shape[1]): it must be >= 1");
  if (auto s = routing_max_rows(batch_, top_k_, G_, args->active_num, args->capacity, /*from_shapes=*/true, &R_)) return s;
  if (auto s = check_row_idx_type(args->row_idx_type)) return s;
  active_num_ = args->active_num, capacity_ = args->capacity, row_idx_type_ = args->row_idx_type;
  const int64_t slots = batch_ * top_k_;

  if (ex.dim(0) != R_ || ex.dim(1) != K_)
    return fail(MOEGRAD_STATUS_OUTPUT_SHAPE, "expanded_x.shape=[%" PRId64 ", %" PRId64 "] but [R, K]=[%" PRId64
                ", %" PRId64 "] (R = min(batch*top_k, active_num, G*capacity))", ex.dim(0), ex.dim(1), R_, K_);
  const bool to_original = row_idx_type_ == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL;
  const int64_t idx_len = to_original ? R_ : slots;
  if (idx_len > kMaxDim)
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "row_idx_type=1 needs an expanded_row_idx of batch*top_k=%" PRId64
                " elements: more than a dimension may have (2^31-1); use row_idx_type 0", idx_len);
  if (idx.dim(0) != idx_len)
    return fail(MOEGRAD_STATUS_OUTPUT_SHAPE, "expanded_row_idx.shape=[%" PRId64 "] but row_idx_type=%d needs [%s]=[%"
                PRId64 "]", idx.dim(0), row_idx_type_, to_original ? "R" : "batch*top_k", idx_len);
  if (to_original && !idx64 && slots - 1 > std::numeric_limits<int32_t>::max())
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "expanded_row_idx is int32 but positions reach batch*top_k-1=%" PRId64
                ": use int64", slots - 1);
  if (auto s = check_writable(ex)) return s;
  if (auto s = check_writable(idx)) return s;
  if (auto s = check_writable(gl)) return s;
  const Tensor* outputs[] = {&ex, &idx, &gl};
  const Tensor* all[] = {&x, &e, &ex, &idx, &gl};
  if (auto s = check_no_aliasing(outputs, 3, all, 5)) return s;
  tensors_ = tensor_spans(all, 5);
  if (args->num_rows != nullptr) {  // an output too: written before the rows are gathered from x
    const auto first = reinterpret_cast<uintptr_t>(args->num_rows);
    const ByteSpan num_rows{first, first + sizeof(int64_t) - 1, false};
    for (const Tensor* t : all)
      if (auto s = check_disjoint("num_rows", num_rows, t->name, byte_span(t->layout, t->rank, t->elem_bytes))) return s;
    tensors_.add("num_rows", num_rows);
  }

  x_ = x.data(), x_row_ = x.stride(0), x_col_ = x.stride(1);
  experts_ = e.data(), e_row_ = e.stride(0), e_col_ = e.stride(1);
  ex_ = const_cast<std::byte*>(ex.data()), ex_row_ = ex.stride(0), ex_col_ = ex.stride(1);
  row_idx_ = index_out(idx, idx64);
  group_list_ = index_out(gl, gl64);
  num_rows_ = args->num_rows;

  workers_ = std::max(workers, 1);
  WorkspaceLayout layout;
  if (!layout.book(static_cast<size_t>(G_) + 1, sizeof(int64_t), 1, &start_) ||
      !layout.book(static_cast<size_t>(G_), sizeof(int64_t), 1, &cursor_) ||
      !layout.book(static_cast<size_t>(slots), sizeof(int32_t), 1, &expert_) ||
      !layout.book(static_cast<size_t>(slots), sizeof(int64_t), 1, &pos_) || !layout.total(&workspace_bytes_))
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "moe_init_routing: workspace size overflows size_t (batch*top_k=%" PRId64
                ")", slots);
  return MOEGRAD_STATUS_SUCCESS;
}

int64_t MoeInitRoutingOp::expert_at(int64_t p) const {
  const int64_t off = (p / top_k_) * e_row_ + (p % top_k_) * e_col_;
  return experts64_ ? static_cast<const int64_t*>(experts_)[off]
                    : static_cast<int64_t>(static_cast<const int32_t*>(experts_)[off]);
}

// Counting sort: start[g] = first sorted slot of expert g, pos[] = original
// positions in (expert, p) order. Fails on an expert outside [0, G) before
// anything is written. expert_idx is read once, into expert[] (G <= 2^31-1,
// so an id fits in int32): where it is read again, another thread writing
// it during the call could place more slots in an expert than were counted,
// past the end of pos. With one read such a race gives a routing of what
// was read, never a write outside the buffers.
moegrad_status MoeInitRoutingOp::sort_slots(int64_t* start, int64_t* cursor, int32_t* expert, int64_t* pos) const {
  const int64_t slots = batch_ * top_k_;
  std::fill(start, start + G_ + 1, 0);
  for (int64_t p = 0; p < slots; ++p) {
    const int64_t g = expert_at(p);
    if (g < 0 || g >= G_)
      return fail(MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE, "expert_idx[%" PRId64 ", %" PRId64 "]=%" PRId64
                  " is not in [0, G=%" PRId64 ")", p / top_k_, p % top_k_, g, G_);
    expert[p] = static_cast<int32_t>(g);
    ++start[g + 1];
  }
  for (int64_t g = 0; g < G_; ++g) {
    start[g + 1] += start[g];
    cursor[g] = start[g];
  }
  for (int64_t p = 0; p < slots; ++p) pos[cursor[expert[p]]++] = p;
  return MOEGRAD_STATUS_SUCCESS;
}

// expanded_x rows [i0, i1): the token row of kept row i, zeros from M on.
void MoeInitRoutingOp::copy_rows(const int64_t* pos, int64_t M, int64_t i0, int64_t i1) const {
  const int bytes = dtype_bytes(dtype_);
  for (int64_t i = i0; i < i1; ++i) {
    std::byte* dst = ex_ + i * ex_row_ * bytes;
    if (i < M) {
      copy_row(dst, ex_col_, x_ + (pos[i] / top_k_) * x_row_ * bytes, x_col_, K_, bytes);
    } else if (ex_col_ == 1 || K_ == 1) {  // one memset a row: capacity drops can leave most rows padding
      std::memset(dst, 0, static_cast<size_t>(K_) * static_cast<size_t>(bytes));
    } else {
      for (int64_t j = 0; j < K_; ++j) std::memset(dst + j * ex_col_ * bytes, 0, static_cast<size_t>(bytes));
    }
  }
}

moegrad_status MoeInitRoutingOp::run(void* workspace, runtime::ThreadPool& pool, int threads) const {
  std::byte* base = aligned_base(workspace);
  int64_t* start = start_.at<int64_t>(base);
  int64_t* cursor = cursor_.at<int64_t>(base);
  int64_t* pos = pos_.at<int64_t>(base);
  if (auto s = sort_slots(start, cursor, expert_.at<int32_t>(base), pos)) return s;

  // Capacity, then active_num; kept rows are compacted to the front of pos
  // in place (a row never moves to a higher index, so ascending is safe).
  int64_t M = 0;
  for (int64_t g = 0; g < G_; ++g) {
    int64_t kept = start[g + 1] - start[g];
    if (capacity_ >= 0) kept = std::min(kept, capacity_);
    if (active_num_ >= 0) kept = std::min(kept, active_num_ - M);
    for (int64_t r = 0; r < kept; ++r) pos[M + r] = pos[start[g] + r];
    group_list_.set(g, kept);
    M += kept;
  }
  if (row_idx_type_ == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL) {
    for (int64_t i = 0; i < R_; ++i) row_idx_.set(i, i < M ? pos[i] : -1);
  } else {
    for (int64_t p = 0; p < batch_ * top_k_; ++p) row_idx_.set(p, -1);
    for (int64_t i = 0; i < M; ++i) row_idx_.set(pos[i], i);
  }
  if (num_rows_ != nullptr) *num_rows_ = M;
  const int64_t items = (R_ + kRowsPerItem - 1) / kRowsPerItem;
  runtime::parallel_items(pool, threads, items, [&](int64_t item, int) {
    copy_rows(pos, M, item * kRowsPerItem, std::min(R_, (item + 1) * kRowsPerItem));
  });
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad::ops
