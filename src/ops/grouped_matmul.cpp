#include "ops/grouped_matmul.h"

#include <algorithm>
#include <cinttypes>

#include "common/error.h"
#include "driver/routing_table.h"
#include "ops/float_store.h"
#include "ops/tensor_rules.h"
#include "runtime/parallel_items.h"

namespace moegrad::ops {

moegrad_status GroupedMatmulOp::init(const moegrad_grouped_matmul_args* args, const OpKernels& ks, int workers) {
  if (args == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "grouped_matmul: args is NULL");
  Tensor x, w, gl, y;
  DType w_type;
  bool gl64 = false;
  if (auto s = check_float_tensor(args->x, "x", 2, &x, &dtype_)) return s;
  if (auto s = check_float_tensor(args->weight, "weight", 3, &w, &w_type)) return s;
  if (auto s = check_index_tensor(args->group_list, "group_list", 1, &gl, &gl64)) return s;
  if (auto s = check_float_tensor(args->y, "y", 2, &y, &out_dtype_)) return s;
  if (w_type != dtype_)
    return fail(MOEGRAD_STATUS_DTYPE_MISMATCH, "x is %s but weight is %s: they must match", dtype_name(dtype_),
                dtype_name(w_type));
  if (auto s = check_output_dtype(out_dtype_, dtype_, "y", "x")) return s;

  M_ = x.dim(0), K_ = x.dim(1), G_ = w.dim(0), N_ = w.dim(2);
  if (w.dim(1) != K_)
    return fail(MOEGRAD_STATUS_K_MISMATCH, "x.shape[1]=%" PRId64 " != weight.shape[1]=%" PRId64 " (K)", K_, w.dim(1));
  if (gl.dim(0) != G_)
    return fail(MOEGRAD_STATUS_GROUP_COUNT_MISMATCH, "group_list.shape[0]=%" PRId64 " != weight.shape[0]=%" PRId64
                " (G)", gl.dim(0), G_);
  if (N_ == 0 || K_ == 0 || G_ == 0)
    return fail(MOEGRAD_STATUS_EMPTY_DIMENSION, "N=%" PRId64 ", K=%" PRId64 ", G=%" PRId64 ": each must be >= 1", N_,
                K_, G_);
  if (y.dim(0) != M_ || y.dim(1) != N_)
    return fail(MOEGRAD_STATUS_OUTPUT_SHAPE, "y.shape=[%" PRId64 ", %" PRId64 "] but [M, N]=[%" PRId64 ", %" PRId64 "]",
                y.dim(0), y.dim(1), M_, N_);
  if (auto s = check_group_list_type(args->group_list_type)) return s;
  if (auto s = check_writable(y)) return s;
  const Tensor* outputs[] = {&y};
  const Tensor* all[] = {&x, &w, &gl, &y};
  if (auto s = check_no_aliasing(outputs, 1, all, 4)) return s;
  tensors_ = tensor_spans(all, 4);

  x_ = x.data(), x_row_ = x.stride(0), x_col_ = x.stride(1);
  w_ = w.data(), w_g_ = w.stride(0), w_k_ = w.stride(1), w_n_ = w.stride(2);
  group_list_ = index_view(gl, gl64);
  group_list_type_ = args->group_list_type;
  y_ = const_cast<std::byte*>(y.data()), y_row_ = y.stride(0), y_col_ = y.stride(1);
  direct_ = out_dtype_ == DType::kF32 && (N_ == 1 || y_col_ == 1) && y_row_ >= N_;
  if (N_ == 1) y_col_ = 1;  // any stride addresses the single column

  // Plan: tiles of ~240 rows x up to ~2048 columns, the K reduction in
  // blocks of 256 (even, as the fast bf16 mode's pairs need every block but
  // the last). A column block spans a weight row's whole width where it
  // can: each block's tiles read a piece of every weight row of the expert,
  // and pieces of one row read at times a whole pass apart stream from DRAM
  // at about three quarters of the rate of whole rows (a read-only loop in the
  // tiles' order, 128 experts of 2048 x 768 f32: 20 GB/s in 256-column
  // blocks, 27 GB/s whole). ab_compare against 256-column blocks, f32, one
  // thread: 16 rows per expert (256,8,128,2048,768) 0.79x the time,
  // fine-grained 0.90x, zmoe 0.88x (1024 columns: 0.90x), 512,2,8,4096,14336
  // 0.88x (1024: 0.90x; 4096: 0.88x); two threads alike; large-token (N 256)
  // unchanged. The weight grad's output tiles gained nothing from it.
  if (auto s = ks.gemm_for(dtype_, "grouped_matmul", &kernels_)) return s;
  const kernels::GemmKernels& k = *kernels_;
  blk_.ms = round_up(240, k.mr);
  blk_.nc = balanced_block(static_cast<size_t>(N_), 2048, k.nr);
  blk_.kc = std::min<size_t>(static_cast<size_t>(K_), 256);
  col_blocks_ = static_cast<int64_t>(ceil_div(static_cast<size_t>(N_), blk_.nc));
  // No more workers, each with its own packing buffers, than the run can
  // have items: sum_g ceil(c_g / ms) <= floor(M / ms) + (experts with rows)
  // tiles, and at most M, each of col_blocks items. A small M (a few rows
  // per call) on a context of many threads would otherwise book every
  // thread's buffers: M = 1, K = 4096, N = 2048 asked 271 MiB at 64 threads.
  const int64_t ms = static_cast<int64_t>(blk_.ms);
  const int64_t max_tiles = std::min(M_, M_ / ms + std::min(G_, M_));
  workers_ = static_cast<int>(std::clamp<int64_t>(max_tiles * col_blocks_, 1, std::max(workers, 1)));
  WorkspaceLayout layout;
  const size_t g1 = static_cast<size_t>(G_) + 1;
  if (!layout.book(g1, sizeof(int64_t), 1, &group_start_) || !layout.book(g1, sizeof(int64_t), 1, &tile_start_) ||
      !layout.book(1, sizeof(int64_t), workers_, &b_key_) || !book_gemm_worker_slots(&layout, k, blk_, workers_, !direct_, &slots_) || !layout.total(&workspace_bytes_))
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "grouped_matmul: workspace size overflows size_t (G=%" PRId64 ")", G_);
  return MOEGRAD_STATUS_SUCCESS;
}

// Item = column block * tiles + tile; tile t of expert g covers rows
// [group_start[g] + (t - tile_start[g]) * ms, ...) of that expert.
void GroupedMatmulOp::run_tile(std::byte* base, const int64_t* group_start, const int64_t* tile_start, int64_t tiles,
                               int64_t item, int worker) const {
  const int64_t block = item / tiles, t = item % tiles;
  const int64_t g = std::upper_bound(tile_start, tile_start + G_ + 1, t) - tile_start - 1;
  const int64_t ms = static_cast<int64_t>(blk_.ms);
  const int64_t i0 = group_start[g] + (t - tile_start[g]) * ms;
  const size_t count = static_cast<size_t>(std::min(ms, group_start[g + 1] - i0));
  const size_t n0 = static_cast<size_t>(block) * blk_.nc;
  const size_t nn = std::min(blk_.nc, static_cast<size_t>(N_) - n0);

  WorkerScratch ws = worker_scratch(base, slots_, worker);
  for (size_t r = 0; r < count; ++r) ws.rows[r] = static_cast<int32_t>(i0 + static_cast<int64_t>(r));
  // Where the whole K reduction is one block, a worker's next tile of the
  // same expert and column block (large-token's experts have 15 tiles)
  // reuses the weight panel its b_pack already holds, keyed by (g, block),
  // instead of packing it again: large-token's forward, one thread, took
  // about a tenth of its time packing each tile's 128 x 256 weight panel.
  int64_t* held = b_key_.at<int64_t>(base, worker);
  ws.pack.b_key = *held;
  const int64_t b_key = K_ <= static_cast<int64_t>(blk_.kc) ? g * col_blocks_ + block : -1;
  // A direct tile is the output's last store: the kernel makes its NaNs canonical.
  const driver::GemmBlocking blk{kernels_, dtype_, blk_.kc, direct_};
  const driver::GemmOperand a{x_, x_row_, x_col_};
  const driver::GemmOperand b{element_at(w_, dtype_, g * w_g_), w_n_, w_k_};
  const int64_t y_off = i0 * y_row_ + static_cast<int64_t>(n0) * y_col_;
  if (direct_) {
    float* y = static_cast<float*>(y_) + y_off;
    driver::packed_gemm_tile(blk, a, ws.rows, count, b, n0, nn, 0, K_, y, static_cast<size_t>(y_row_), &ws.pack, -1,
                             b_key);
    *held = ws.pack.b_key;
    return;
  }
  driver::packed_gemm_tile(blk, a, ws.rows, count, b, n0, nn, 0, K_, ws.c_tile, blk_.nc, &ws.pack, -1, b_key);
  *held = ws.pack.b_key;
  for (size_t r = 0; r < count; ++r)
    store_row(out_dtype_, element_at(y_, out_dtype_, y_off + static_cast<int64_t>(r) * y_row_), y_col_,
              ws.c_tile + r * blk_.nc, nn);
}

moegrad_status GroupedMatmulOp::run(void* workspace, runtime::ThreadPool& pool, int threads) const {
  std::byte* base = aligned_base(workspace);
  int64_t* group_start = group_start_.at<int64_t>(base);
  if (auto s = driver::build_group_start(group_list_, group_list_type_, M_, "x", group_start)) return s;
  int64_t* tile_start = tile_start_.at<int64_t>(base);
  const int64_t ms = static_cast<int64_t>(blk_.ms);
  tile_start[0] = 0;
  for (int64_t g = 0; g < G_; ++g)
    tile_start[g + 1] = tile_start[g] + (group_start[g + 1] - group_start[g] + ms - 1) / ms;
  const int64_t tiles = tile_start[G_];
  for (int w = 0; w < workers_; ++w) *b_key_.at<int64_t>(base, w) = -1;  // no panel held yet
  runtime::parallel_items(pool, threads, tiles * col_blocks_, [&](int64_t item, int worker) {
    run_tile(base, group_start, tile_start, tiles, item, worker);
  });
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad::ops
