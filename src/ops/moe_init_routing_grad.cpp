#include "ops/moe_init_routing_grad.h"

#include <algorithm>
#include <cinttypes>
#include <utility>

#include "common/error.h"
#include "driver/routing_table.h"
#include "ops/float_store.h"
#include "ops/gemm_scratch.h"
#include "ops/tensor_rules.h"
#include "runtime/parallel_items.h"

namespace moegrad::ops {

moegrad_status MoeInitRoutingGradOp::init(const moegrad_moe_init_routing_grad_args* args,
                                          const OpKernels& k, int workers) {
  if (args == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "moe_init_routing_grad: args is NULL");
  Tensor d, idx, gx;
  DType gx_type;
  bool idx64 = false;
  GradXProblem& p = problem_;
  if (auto s = check_float_tensor(args->grad_expanded_x, "grad_expanded_x", 2, &d, &p.dtype)) return s;
  if (auto s = check_index_tensor(args->expanded_row_idx, "expanded_row_idx", 1, &idx, &idx64)) return s;
  if (auto s = check_float_tensor(args->grad_x, "grad_x", 2, &gx, &gx_type)) return s;
  if (gx_type != DType::kF32)
    return fail(MOEGRAD_STATUS_BAD_DTYPE, "grad_x is %s: it must be float32", dtype_name(gx_type));

  p.M = d.dim(0), p.K = d.dim(1);
  if (p.K == 0) return fail(MOEGRAD_STATUS_EMPTY_DIMENSION, "K=0 (grad_expanded_x.shape[1]): it must be >= 1");
  if (args->batch <= 0) return fail(MOEGRAD_STATUS_BAD_BATCH, "batch=%" PRId64 " must be > 0", args->batch);
  if (args->top_k <= 0) return fail(MOEGRAD_STATUS_BAD_TOP_K, "top_k=%" PRId64 " must be > 0", args->top_k);
  if (auto s = check_row_idx_type(args->row_idx_type)) return s;
  int64_t slots = 0;
  if (__builtin_mul_overflow(args->batch, args->top_k, &slots))
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "batch*top_k = %" PRId64 "*%" PRId64 " overflows int64", args->batch,
                args->top_k);
  if (gx.dim(0) != args->batch || gx.dim(1) != p.K)
    return fail(MOEGRAD_STATUS_GRAD_X_SHAPE, "grad_x.shape=[%" PRId64 ", %" PRId64 "] but [batch, K]=[%" PRId64
                ", %" PRId64 "]", gx.dim(0), gx.dim(1), args->batch, p.K);
  const int64_t L = idx.dim(0);
  if (p.M > slots)
    return fail(MOEGRAD_STATUS_M_EXCEEDS_SLOTS, "M=%" PRId64 " (grad_expanded_x rows) > batch*top_k=%" PRId64, p.M,
                slots);
  if (args->row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL && L < p.M)
    return fail(MOEGRAD_STATUS_INDEX_TOO_SHORT, "row_idx_type=0 needs expanded_row_idx length L=%" PRId64
                " >= M=%" PRId64, L, p.M);
  if (args->row_idx_type == MOEGRAD_ROW_IDX_ORIGINAL_TO_EXPANDED && L > slots)
    return fail(MOEGRAD_STATUS_INDEX_TOO_LONG, "row_idx_type=1 needs expanded_row_idx length L=%" PRId64
                " <= batch*top_k=%" PRId64, L, slots);
  if (auto s = check_writable(gx)) return s;
  const Tensor* outputs[] = {&gx};
  const Tensor* all[] = {&d, &idx, &gx};
  if (auto s = check_no_aliasing(outputs, 1, all, 3)) return s;
  tensors_ = tensor_spans(all, 3);

  p.batch = args->batch, p.top_k = args->top_k, p.row_idx_type = args->row_idx_type;
  p.grad_y = d.data(), p.gy_row = d.stride(0), p.gy_col = d.stride(1);
  p.row_idx = index_view(idx, idx64);
  p.grad_x = reinterpret_cast<float*>(const_cast<std::byte*>(gx.data()));
  p.gx_row = gx.stride(0), p.gx_col = gx.stride(1);

  // Plan: column blocks of ~256; when they are too few to keep 4 items per
  // worker, split the tokens too.
  kernels_ = k.exact;
  workers_ = std::max(workers, 1);
  nc_ = balanced_block(static_cast<size_t>(p.K), 256, 16);
  col_blocks_ = static_cast<int64_t>(ceil_div(static_cast<size_t>(p.K), nc_));
  const int64_t want = 4 * static_cast<int64_t>(workers_);
  chunks_ = std::min<int64_t>(col_blocks_ >= want ? 1 : (want + col_blocks_ - 1) / col_blocks_, p.batch);
  tokens_per_chunk_ = (p.batch + chunks_ - 1) / chunks_;
  chunks_ = (p.batch + tokens_per_chunk_ - 1) / tokens_per_chunk_;
  // Each worker's row buffer is booked only for workers the run can give an
  // item, as the GEMMs book theirs: a 3-token call asked 2 MiB at 4096
  // threads for at most 3 workers.
  workers_ = static_cast<int>(std::min<int64_t>(workers_, chunks_ * col_blocks_));  // items >= 1
  WorkspaceLayout layout;
  if (!layout.book(static_cast<size_t>(p.M), sizeof(int32_t), 1, &token_of_row_) ||
      !layout.book(static_cast<size_t>(p.M), sizeof(int32_t), 1, &rows_by_chunk_) ||
      !layout.book(static_cast<size_t>(chunks_), sizeof(int32_t), 1, &chunk_ends_) ||
      !layout.book(nc_, sizeof(float), workers_, &row_buffer_) || !layout.total(&workspace_bytes_))
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "moe_init_routing_grad: workspace size overflows size_t (M=%" PRId64 ")",
                p.M);
  return MOEGRAD_STATUS_SUCCESS;
}

void MoeInitRoutingGradOp::run_block(std::byte* base, const RowsByChunk& lists, int64_t item, int worker) const {
  const GradXProblem& p = problem_;
  const int64_t chunk = item / col_blocks_, block = item % col_blocks_;
  const int64_t t0 = chunk * tokens_per_chunk_, t1 = std::min(p.batch, t0 + tokens_per_chunk_);
  const int64_t k0 = block * static_cast<int64_t>(nc_);
  const size_t kn = std::min(nc_, static_cast<size_t>(p.K - k0));
  float* buffer = row_buffer_.at<float>(base, worker);
  const bool direct_src = p.dtype == DType::kF32 && (p.gy_col == 1 || kn == 1);

  for (int64_t b = t0; b < t1; ++b)
    for (size_t j = 0; j < kn; ++j) p.grad_x[b * p.gx_row + (k0 + static_cast<int64_t>(j)) * p.gx_col] = 0.0f;
  for (int32_t r = chunk > 0 ? lists.ends[chunk - 1] : 0; r < lists.ends[chunk]; ++r) {
    const int64_t i = lists.rows[r], b = lists.token_of_row[i];
    const void* src = element_at(p.grad_y, p.dtype, i * p.gy_row + k0 * p.gy_col);
    if (!direct_src) load_row(p.dtype, src, p.gy_col, buffer, kn);
    const float* row = direct_src ? static_cast<const float*>(src) : buffer;
    float* dst = p.grad_x + b * p.gx_row + k0 * p.gx_col;
    if (p.gx_col == 1 || kn == 1) {
      kernels_->add_row(dst, row, kn);
    } else {
      add_row_strided(dst, p.gx_col, row, kn);
    }
  }
}

moegrad_status MoeInitRoutingGradOp::run(void* workspace, runtime::ThreadPool& pool, int threads) const {
  std::byte* base = aligned_base(workspace);
  int32_t* token_of_row = token_of_row_.at<int32_t>(base);
  if (auto s = driver::build_token_of_row(problem_, token_of_row)) return s;
  // A counting sort by token chunk, stable in the row (so each token's rows
  // stay ascending): ends[c] counts chunk c's rows, then becomes its list's
  // start, then (after each row is placed at it) its end.
  int32_t* rows = rows_by_chunk_.at<int32_t>(base);
  int32_t* ends = chunk_ends_.at<int32_t>(base);
  std::fill(ends, ends + chunks_, 0);
  for (int64_t i = 0; i < problem_.M; ++i)
    if (token_of_row[i] >= 0) ++ends[token_of_row[i] / tokens_per_chunk_];
  int32_t start = 0;
  for (int64_t c = 0; c < chunks_; ++c) start += std::exchange(ends[c], start);
  for (int64_t i = 0; i < problem_.M; ++i)
    if (token_of_row[i] >= 0) rows[ends[token_of_row[i] / tokens_per_chunk_]++] = static_cast<int32_t>(i);
  const RowsByChunk lists{token_of_row, rows, ends};
  runtime::parallel_items(pool, threads, chunks_ * col_blocks_,
                         [&](int64_t item, int worker) noexcept { run_block(base, lists, item, worker); });
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad::ops
