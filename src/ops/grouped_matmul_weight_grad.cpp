#include "ops/grouped_matmul_weight_grad.h"

#include <algorithm>
#include <cinttypes>

#include "common/error.h"
#include "driver/routing_table.h"
#include "ops/float_store.h"
#include "ops/tensor_rules.h"
#include "runtime/parallel_items.h"

namespace moegrad::ops {

moegrad_status GroupedMatmulWeightGradOp::init(const moegrad_grouped_matmul_weight_grad_args* args,
                                               const OpKernels& ks, int workers) {
  if (args == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "grouped_matmul_weight_grad: args is NULL");
  Tensor x, gy, gl, gw;
  DType gy_type;
  bool gl64 = false;
  if (auto s = check_float_tensor(args->x, "x", 2, &x, &dtype_)) return s;
  if (auto s = check_float_tensor(args->grad_y, "grad_y", 2, &gy, &gy_type)) return s;
  if (auto s = check_index_tensor(args->group_list, "group_list", 1, &gl, &gl64)) return s;
  if (auto s = check_float_tensor(args->grad_weight, "grad_weight", 3, &gw, &out_dtype_)) return s;
  if (gy_type != dtype_)
    return fail(MOEGRAD_STATUS_DTYPE_MISMATCH, "x is %s but grad_y is %s: they must match", dtype_name(dtype_),
                dtype_name(gy_type));
  if (auto s = check_output_dtype(out_dtype_, dtype_, "grad_weight", "x")) return s;
  if (args->accumulate != 0 && args->accumulate != 1)
    return fail(MOEGRAD_STATUS_BAD_ACCUMULATE, "accumulate=%d must be 0 (overwrite) or 1 (add)", args->accumulate);
  accumulate_ = args->accumulate == 1;
  if (accumulate_ && out_dtype_ != DType::kF32)
    return fail(MOEGRAD_STATUS_ACCUMULATE_NEEDS_F32, "accumulate=1 needs a float32 grad_weight, got %s",
                dtype_name(out_dtype_));

  M_ = x.dim(0), K_ = x.dim(1), N_ = gy.dim(1), G_ = gl.dim(0);
  if (gy.dim(0) != M_)
    return fail(MOEGRAD_STATUS_M_MISMATCH, "x.shape[0]=%" PRId64 " != grad_y.shape[0]=%" PRId64 " (M)", M_, gy.dim(0));
  if (N_ == 0 || K_ == 0 || G_ == 0)
    return fail(MOEGRAD_STATUS_EMPTY_DIMENSION, "N=%" PRId64 ", K=%" PRId64 ", G=%" PRId64 ": each must be >= 1", N_,
                K_, G_);
  if (gw.dim(0) != G_ || gw.dim(1) != K_ || gw.dim(2) != N_)
    return fail(MOEGRAD_STATUS_OUTPUT_SHAPE, "grad_weight.shape=[%" PRId64 ", %" PRId64 ", %" PRId64
                "] but [G, K, N]=[%" PRId64 ", %" PRId64 ", %" PRId64 "]", gw.dim(0), gw.dim(1), gw.dim(2), G_, K_, N_);
  if (auto s = check_group_list_type(args->group_list_type)) return s;
  if (auto s = check_writable(gw)) return s;
  const Tensor* outputs[] = {&gw};
  const Tensor* all[] = {&x, &gy, &gl, &gw};
  if (auto s = check_no_aliasing(outputs, 1, all, 4)) return s;
  tensors_ = tensor_spans(all, 4);

  x_ = x.data(), x_row_ = x.stride(0), x_col_ = x.stride(1);
  gy_ = gy.data(), gy_row_ = gy.stride(0), gy_col_ = gy.stride(1);
  group_list_ = index_view(gl, gl64);
  group_list_type_ = args->group_list_type;
  gw_ = const_cast<std::byte*>(gw.data()), gw_g_ = gw.stride(0), gw_k_ = gw.stride(1), gw_n_ = gw.stride(2);
  if (N_ == 1) gw_n_ = 1;  // any stride addresses the single column
  direct_ = out_dtype_ == DType::kF32 && !accumulate_ && gw_n_ == 1 && gw_k_ >= N_;

  // Plan: tiles of ~240 k x ~256 n, the row reduction in blocks of 256 (even,
  // as the fast bf16 mode's pairs need every block but the last: its pairs
  // run from each expert's first row).
  if (auto s = ks.gemm_for(dtype_, "grouped_matmul_weight_grad", &kernels_)) return s;
  const kernels::GemmKernels& k = *kernels_;
  workers_ = std::max(workers, 1);
  blk_.ms = balanced_block(static_cast<size_t>(K_), 240, k.mr);
  blk_.nc = balanced_block(static_cast<size_t>(N_), 256, k.nr);
  blk_.kc = std::clamp<size_t>(static_cast<size_t>(M_), 1, 256);
  k_blocks_ = static_cast<int64_t>(ceil_div(static_cast<size_t>(K_), blk_.ms));
  n_blocks_ = static_cast<int64_t>(ceil_div(static_cast<size_t>(N_), blk_.nc));
  // An item's n blocks share its packed x^T rows (run_item); they are split
  // into runs only where experts x k blocks give fewer than 4 items a worker.
  const int64_t want_runs = (4 * static_cast<int64_t>(workers_) + G_ * k_blocks_ - 1) / (G_ * k_blocks_);
  const int64_t runs = std::clamp<int64_t>(want_runs, 1, n_blocks_);
  n_per_run_ = (n_blocks_ + runs - 1) / runs;
  n_runs_ = (n_blocks_ + n_per_run_ - 1) / n_per_run_;
  // No more workers, each with its own packing buffers, than items: a
  // small layer on a context of many threads would otherwise book every
  // thread's buffers. (Each output tile is one item's whole sum, so the
  // runs' split, planned for the asked workers, changes no bit.)
  workers_ = static_cast<int>(std::min<int64_t>(workers_, G_ * k_blocks_ * n_runs_));
  WorkspaceLayout layout;
  if (!layout.book(static_cast<size_t>(G_) + 1, sizeof(int64_t), 1, &group_start_) ||
      !book_gemm_worker_slots(&layout, k, blk_, workers_, !direct_, &slots_) || !layout.total(&workspace_bytes_))
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "grouped_matmul_weight_grad: workspace size overflows size_t (G=%" PRId64
                ")", G_);
  return MOEGRAD_STATUS_SUCCESS;
}

// Item = (expert g, k block, run of n blocks): its tiles along N in turn,
// which share the expert's x^T rows k0..k0+kn, packed once (a_key) where
// the expert's rows fit one reduction block, as they do at tens to hundreds
// of rows per expert. With an item per tile, the transposing pack of x ran
// once per n block: 8-9 % of perf's samples in the library at the
// fine-grained and zmoe sizes (docs/performance-history.md has the A/B).
void GroupedMatmulWeightGradOp::run_item(std::byte* base, const int64_t* group_start, int64_t item,
                                         int worker) const {
  const int64_t g = item / (k_blocks_ * n_runs_), kb = item / n_runs_ % k_blocks_, run = item % n_runs_;
  const size_t k0 = static_cast<size_t>(kb) * blk_.ms;
  const size_t kn = std::min(blk_.ms, static_cast<size_t>(K_) - k0);

  WorkerScratch ws = worker_scratch(base, slots_, worker);
  for (size_t r = 0; r < kn; ++r) ws.rows[r] = static_cast<int32_t>(k0 + r);
  // A direct tile is the output's last store: the kernel makes its NaNs canonical.
  const driver::GemmBlocking blk{kernels_, dtype_, blk_.kc, direct_};
  const driver::GemmOperand a{x_, x_col_, x_row_};
  const driver::GemmOperand b{gy_, gy_col_, gy_row_};
  const int64_t p0 = group_start[g], len = group_start[g + 1] - p0;  // len 0: exact zeros
  for (int64_t nb = run * n_per_run_; nb < std::min(n_blocks_, (run + 1) * n_per_run_); ++nb) {
    const size_t n0 = static_cast<size_t>(nb) * blk_.nc;
    const size_t nn = std::min(blk_.nc, static_cast<size_t>(N_) - n0);
    const int64_t dst = g * gw_g_ + static_cast<int64_t>(k0) * gw_k_ + static_cast<int64_t>(n0) * gw_n_;
    if (direct_) {
      float* gw = static_cast<float*>(gw_) + dst;
      driver::packed_gemm_tile(blk, a, ws.rows, kn, b, n0, nn, p0, len, gw, static_cast<size_t>(gw_k_), &ws.pack,
                               item, -1);
      continue;
    }
    driver::packed_gemm_tile(blk, a, ws.rows, kn, b, n0, nn, p0, len, ws.c_tile, blk_.nc, &ws.pack, item, -1);
    for (size_t r = 0; r < kn; ++r) {
      const float* c = ws.c_tile + r * blk_.nc;
      const int64_t row = dst + static_cast<int64_t>(r) * gw_k_;
      if (!accumulate_) {
        store_row(out_dtype_, element_at(gw_, out_dtype_, row), gw_n_, c, nn);
      } else if (gw_n_ == 1) {
        kernels_->add_row(static_cast<float*>(gw_) + row, c, nn);
      } else {
        add_row_strided(static_cast<float*>(gw_) + row, gw_n_, c, nn);
      }
    }
  }
}

moegrad_status GroupedMatmulWeightGradOp::run(void* workspace, runtime::ThreadPool& pool, int threads) const {
  std::byte* base = aligned_base(workspace);
  int64_t* group_start = group_start_.at<int64_t>(base);
  if (auto s = driver::build_group_start(group_list_, group_list_type_, M_, "x", group_start)) return s;
  runtime::parallel_items(pool, threads, G_ * k_blocks_ * n_runs_,
                         [&](int64_t item, int worker) { run_item(base, group_start, item, worker); });
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad::ops
