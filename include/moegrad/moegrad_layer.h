/*
 * moegrad — the rest of a Mixture-of-Experts expert layer around the fused
 * grad-x operator of moegrad.h: routing, grouped matmul forward, weight
 * gradient and the non-fused scatter-add. Include it after (or instead of)
 * moegrad.h; contexts, statuses and error messages are shared. These
 * operators take a context's threads and ISA, and the two GEMMs its fast
 * bf16 mode (moegrad_context_set_fast_bf16): bf16 inputs then run in that
 * mode's pair order (README.md, "Fast bf16 mode"; forward: pairs of x's
 * columns from 0; weight grad: pairs of an expert's rows from its first),
 * or planning fails with MOEGRAD_STATUS_ISA_UNAVAILABLE where the context's
 * ISA has no pair kernel; otherwise SPEC §5's order, below.
 *
 *   forward:   expanded_x, expanded_row_idx, group_list = moe_init_routing(x, expert_idx)
 *              y = grouped_matmul(expanded_x, weight, group_list)
 *   backward:  grad_x      = moegrad_grad_x(grad_y, weight, expanded_row_idx, group_list)   (moegrad.h)
 *              grad_weight = grouped_matmul_weight_grad(expanded_x, grad_y, group_list)
 *   baseline:  grad_x      = moe_init_routing_grad(grouped_matmul(grad_y, weight^T), ...)
 *
 * Every operator has the same two phases as grad-x:
 *
 *   size_t ws; moegrad_op_executor* ex;
 *   moegrad_grouped_matmul_get_workspace_size(&args, ctx, &ws, &ex);  // validate + plan
 *   moegrad_grouped_matmul(workspace, ws, ex, ctx);                   // run (contents checked first)
 *   moegrad_op_executor_destroy(ex);
 *
 * or one call, moegrad_grouped_matmul_run(&args, ctx). An executor is single
 * use (once a run succeeded) and runs only with the function of the operator
 * it was planned for (MOEGRAD_STATUS_EXECUTOR_KIND otherwise). On any error
 * no output is written, and the executor stays unused.
 *
 * Conventions shared by all four operators:
 *  - the args structs, and the DLTensor structs with their shape and
 *    strides arrays, are copied by planning and need not outlive it; the
 *    memory they point to (the tensors' data, and moe_init_routing's
 *    num_rows, written by the run) must stay valid until the run finishes;
 *  - tensors are DLPack DLTensor on kDLCPU, any element strides (NULL: compact
 *    row-major); outputs must not overlap themselves (MOEGRAD_STATUS_BAD_LAYOUT),
 *    and no output may share memory with an input or another output
 *    (MOEGRAD_STATUS_ALIASING; the check compares address ranges, so
 *    interleaved views of one buffer are refused too); nor may the
 *    workspace (the bytes get_workspace_size reported) share memory with
 *    any tensor, checked by the run;
 *  - float tensors are float32, float16 or bfloat16, widened exactly to f32;
 *    index tensors are int32 or int64;
 *  - experts own contiguous expanded rows, expert g rows [start_g, start_g +
 *    count_g), start_0 = 0; group_list holds counts (or cumsums, with
 *    group_list_type = MOEGRAD_GROUP_LIST_CUMSUM) and must sum to M;
 *  - routing positions are token-major: p = b * top_k + j (SPEC §3);
 *  - every GEMM is moegrad's one engine: each output element is one fp32 FMA
 *    chain over the reduction index in ascending order, starting at +0.0,
 *    never split across threads, so results are bitwise identical for any
 *    thread count, ISA path and workspace address (SPEC §5; in the fast bf16
 *    mode, the mode's chain, identical for any thread count);
 *  - every NaN a GEMM or moe_init_routing_grad's scatter-add stores is the
 *    one canonical NaN (f32 0x7fc00000, f16 0x7e00, bf16 0x7fc0), whichever
 *    NaNs met; moe_init_routing copies rows, NaN bits included.
 */
#ifndef MOEGRAD_MOEGRAD_LAYER_H_
#define MOEGRAD_MOEGRAD_LAYER_H_

#include <moegrad/moegrad.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A planned, single-use run of one of the operators below. */
typedef struct moegrad_op_executor moegrad_op_executor;

MOEGRAD_API void moegrad_op_executor_destroy(moegrad_op_executor* executor);

/* "No limit" for active_num and capacity. */
#define MOEGRAD_NO_LIMIT (-1)

/* ---- moe_init_routing (forward permute) -------------------------------------
 *
 * Sorts the batch*top_k routing slots by expert, stably (ties by original
 * position p = b * top_k + j), and gathers the tokens' rows:
 *
 *   expanded_x[i, :] = x[p_i / top_k, :]          for expanded rows i < M
 *
 * Dropping, in this order:
 *  1. capacity C >= 0: each expert keeps its first C slots (smallest p);
 *  2. active_num A >= 0: of what is left, the first A expanded rows are kept.
 * M = the number of kept rows = sum(group_list). A dropped slot gets -1 in the
 * original->expanded index.
 *
 * Output sizes are fixed at planning time: expanded_x has R rows, where R =
 * moegrad_moe_init_routing_max_rows(...) = min(batch*top_k, A, G*C) (the
 * limits that are set). M == R unless a capacity drops more than active_num
 * would; rows [M, R) of expanded_x are written as zeros (and as -1 in a
 * row_idx_type 0 index) so nothing is left uninitialised; use the first M.
 *
 * expanded_row_idx (SPEC §3):
 *  row_idx_type 0 (expanded -> original): [R], idx[i] = p_i for i < M, -1 after;
 *  row_idx_type 1 (original -> expanded): [batch*top_k], idx[p] = i, or -1 if
 *  slot p was dropped.
 * These are exactly the inputs moegrad_grad_x and moe_init_routing_grad take.
 */
typedef struct moegrad_moe_init_routing_args {
  const DLTensor* x;                /* [batch, K] f32 | f16 | bf16 */
  const DLTensor* expert_idx;       /* [batch, top_k] int32 | int64, values in [0, G) */
  const DLTensor* expanded_x;       /* [R, K] x's dtype, output */
  const DLTensor* expanded_row_idx; /* int32 | int64 output, [R] (type 0) or [batch*top_k] (type 1) */
  const DLTensor* group_list;       /* [G] int32 | int64 output: rows per expert (counts) */
  int64_t active_num;               /* MOEGRAD_NO_LIMIT or >= 0 */
  int64_t capacity;                 /* MOEGRAD_NO_LIMIT or >= 0 tokens per expert */
  int32_t row_idx_type;             /* moegrad_row_idx_type */
  int64_t* num_rows;                /* optional output (may be NULL): M, written by the run */
} moegrad_moe_init_routing_args;

/* R for the given sizes and limits (validates them like the operator does;
 * MOEGRAD_STATUS_SIZE_OVERFLOW where R would pass 2^31-1, a dimension's
 * limit, so that no caller allocates an expanded_x the operator must
 * refuse). With row_idx_type 1, expanded_row_idx has batch*top_k entries,
 * which must be within that limit too. The operator's workspace, a
 * counting sort of every slot, is about 12*batch*top_k + 16*G bytes however
 * small R is. */
MOEGRAD_API moegrad_status moegrad_moe_init_routing_max_rows(int64_t batch, int64_t top_k, int64_t num_experts,
                                                             int64_t active_num, int64_t capacity,
                                                             int64_t* max_rows);

MOEGRAD_API moegrad_status moegrad_moe_init_routing_get_workspace_size(const moegrad_moe_init_routing_args* args,
                                                                       const moegrad_context* ctx,
                                                                       size_t* workspace_bytes,
                                                                       moegrad_op_executor** executor);
/* Checks every expert index before writing any output. */
MOEGRAD_API moegrad_status moegrad_moe_init_routing(void* workspace, size_t workspace_bytes,
                                                    moegrad_op_executor* executor, const moegrad_context* ctx);
MOEGRAD_API moegrad_status moegrad_moe_init_routing_run(const moegrad_moe_init_routing_args* args,
                                                        const moegrad_context* ctx);

/* ---- grouped_matmul (forward) -----------------------------------------------
 *
 *   y[i, n] = sum_{k=0}^{K-1} x[i, k] * weight[g(i), k, n]    (fp32 FMA chain, ascending k;
 *                                                              fast bf16 mode: its pair chain, pairs from k = 0)
 *
 * y is float32 or x's dtype; a f16/bf16 y is the f32 chain rounded once (to
 * nearest even). weight may be any strided view, e.g. a [G, N, K] buffer seen
 * transposed — which also makes this the grad-input GEMM of the non-fused
 * path: grouped_matmul(grad_y, weight^T) = d_expanded_x.
 */
typedef struct moegrad_grouped_matmul_args {
  const DLTensor* x;          /* [M, K] f32 | f16 | bf16 (expanded_x) */
  const DLTensor* weight;     /* [G, K, N] x's dtype */
  const DLTensor* group_list; /* [G] int32 | int64 */
  const DLTensor* y;          /* [M, N] float32 or x's dtype, output */
  int32_t group_list_type;    /* moegrad_group_list_type */
} moegrad_grouped_matmul_args;

MOEGRAD_API moegrad_status moegrad_grouped_matmul_get_workspace_size(const moegrad_grouped_matmul_args* args,
                                                                     const moegrad_context* ctx,
                                                                     size_t* workspace_bytes,
                                                                     moegrad_op_executor** executor);
MOEGRAD_API moegrad_status moegrad_grouped_matmul(void* workspace, size_t workspace_bytes,
                                                  moegrad_op_executor* executor, const moegrad_context* ctx);
MOEGRAD_API moegrad_status moegrad_grouped_matmul_run(const moegrad_grouped_matmul_args* args,
                                                      const moegrad_context* ctx);

/* ---- grouped_matmul_weight_grad ------------------------------------------------
 *
 *   c[g, k, n] = sum_{i = start_g}^{start_g + count_g - 1} x[i, k] * grad_y[i, n]
 *                (fp32 FMA chain over the expert's rows, ascending i, from +0.0;
 *                 fast bf16 mode: its pair chain, pairs from i = start_g;
 *                 an empty expert gives exact +0.0)
 *   grad_weight[g, k, n] = c                        (accumulate = 0; f32, or rounded once to x's dtype)
 *   grad_weight[g, k, n] = grad_weight + c          (accumulate = 1; one f32 add, float32 grad_weight only)
 *
 * Work is split over (expert, k block, n block) only: the M reduction of an
 * element is never split, so the bits do not depend on the thread count.
 */
typedef struct moegrad_grouped_matmul_weight_grad_args {
  const DLTensor* x;           /* [M, K] f32 | f16 | bf16 (expanded_x) */
  const DLTensor* grad_y;      /* [M, N] x's dtype */
  const DLTensor* group_list;  /* [G] int32 | int64 */
  const DLTensor* grad_weight; /* [G, K, N] float32 or x's dtype, output (read too if accumulate) */
  int32_t group_list_type;     /* moegrad_group_list_type */
  int32_t accumulate;          /* 0: overwrite, 1: add into a float32 grad_weight */
} moegrad_grouped_matmul_weight_grad_args;

MOEGRAD_API moegrad_status moegrad_grouped_matmul_weight_grad_get_workspace_size(
    const moegrad_grouped_matmul_weight_grad_args* args, const moegrad_context* ctx, size_t* workspace_bytes,
    moegrad_op_executor** executor);
MOEGRAD_API moegrad_status moegrad_grouped_matmul_weight_grad(void* workspace, size_t workspace_bytes,
                                                              moegrad_op_executor* executor,
                                                              const moegrad_context* ctx);
MOEGRAD_API moegrad_status moegrad_grouped_matmul_weight_grad_run(const moegrad_grouped_matmul_weight_grad_args* args,
                                                                  const moegrad_context* ctx);

/* ---- moe_init_routing_grad (the non-fused scatter-add) ------------------------
 *
 *   grad_x[b, k] = ((0 + d[i1, k]) + d[i2, k]) + ...   over the expanded rows
 *                  i1 < i2 < ... of token b (SPEC §3 index semantics, §5 order)
 *
 * with d = grad_expanded_x widened exactly to f32; a token with no row gets
 * +0.0. Fed with d = grouped_matmul(grad_y, weight^T) in float32 it gives the
 * same bits as moegrad_grad_x: it is the baseline the fused operator replaces.
 */
typedef struct moegrad_moe_init_routing_grad_args {
  const DLTensor* grad_expanded_x;  /* [M, K] f32 | f16 | bf16 */
  const DLTensor* expanded_row_idx; /* [L] int32 | int64, as for moegrad_grad_x */
  const DLTensor* grad_x;           /* [batch, K] float32, output */
  int64_t batch;                    /* > 0 */
  int64_t top_k;                    /* > 0 */
  int32_t row_idx_type;             /* moegrad_row_idx_type */
} moegrad_moe_init_routing_grad_args;

MOEGRAD_API moegrad_status moegrad_moe_init_routing_grad_get_workspace_size(
    const moegrad_moe_init_routing_grad_args* args, const moegrad_context* ctx, size_t* workspace_bytes,
    moegrad_op_executor** executor);
MOEGRAD_API moegrad_status moegrad_moe_init_routing_grad(void* workspace, size_t workspace_bytes,
                                                         moegrad_op_executor* executor, const moegrad_context* ctx);
MOEGRAD_API moegrad_status moegrad_moe_init_routing_grad_run(const moegrad_moe_init_routing_grad_args* args,
                                                             const moegrad_context* ctx);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* The C++ wrappers below, like moegrad.hpp, report errors as moegrad::Error
 * exceptions and need C++14: a C++ program built without exceptions or for
 * an older standard, or one that defines MOEGRAD_NO_CXX_API, gets the C API
 * alone. (Comments in this part are C89 comments too: GNU C90 reads them.) */
#if defined(__cplusplus) && __cplusplus >= 201402L && (defined(__cpp_exceptions) || defined(__EXCEPTIONS)) && \
    !defined(MOEGRAD_NO_CXX_API)

/* C++ linkage, also where a program includes this C header inside
 * extern "C" { }: the standard headers below declare templates. */
extern "C++" {

#include <moegrad/moegrad.hpp>

#include <cstddef>
#include <utility>

namespace moegrad {

/* A planned, single-use run of a layer operator (RAII over moegrad_op_executor).
 * A moved-from one holds no plan (workspace_bytes() 0; run throws NULL_POINTER).
 * Without ctx, planning and runs use the library's default context.
 *   moegrad::OpExecutor ex(args, ctx);            // validate + plan (throws moegrad::Error)
 *   std::vector<unsigned char> ws(ex.workspace_bytes());  // <vector>
 *   ex.run(ws.data(), ws.size(), ctx); */
class OpExecutor {
 public:
  explicit OpExecutor(const moegrad_moe_init_routing_args& a, const Context& ctx = Context::default_context())
      : run_(moegrad_moe_init_routing) {
    check(moegrad_moe_init_routing_get_workspace_size(&a, ctx.get(), &workspace_bytes_, &ex_));
  }
  explicit OpExecutor(const moegrad_grouped_matmul_args& a, const Context& ctx = Context::default_context())
      : run_(moegrad_grouped_matmul) {
    check(moegrad_grouped_matmul_get_workspace_size(&a, ctx.get(), &workspace_bytes_, &ex_));
  }
  explicit OpExecutor(const moegrad_grouped_matmul_weight_grad_args& a,
                      const Context& ctx = Context::default_context())
      : run_(moegrad_grouped_matmul_weight_grad) {
    check(moegrad_grouped_matmul_weight_grad_get_workspace_size(&a, ctx.get(), &workspace_bytes_, &ex_));
  }
  explicit OpExecutor(const moegrad_moe_init_routing_grad_args& a, const Context& ctx = Context::default_context())
      : run_(moegrad_moe_init_routing_grad) {
    check(moegrad_moe_init_routing_grad_get_workspace_size(&a, ctx.get(), &workspace_bytes_, &ex_));
  }
  ~OpExecutor() { moegrad_op_executor_destroy(ex_); }
  OpExecutor(const OpExecutor&) = delete;
  OpExecutor& operator=(const OpExecutor&) = delete;
  OpExecutor(OpExecutor&& o) noexcept
      : ex_(std::exchange(o.ex_, nullptr)), workspace_bytes_(std::exchange(o.workspace_bytes_, 0)), run_(o.run_) {}
  OpExecutor& operator=(OpExecutor&& o) noexcept {
    if (this != &o) {
      moegrad_op_executor_destroy(ex_);
      ex_ = std::exchange(o.ex_, nullptr);
      workspace_bytes_ = std::exchange(o.workspace_bytes_, 0);
      run_ = o.run_;
    }
    return *this;
  }

  std::size_t workspace_bytes() const noexcept { return workspace_bytes_; }
  void run(void* workspace, std::size_t workspace_bytes, const Context& ctx = Context::default_context()) {
    check(run_(workspace, workspace_bytes, ex_, ctx.get()));
  }

 private:
  using RunFn = moegrad_status (*)(void*, size_t, moegrad_op_executor*, const moegrad_context*);
  moegrad_op_executor* ex_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  RunFn run_;
};

/* R, the rows of moe_init_routing's expanded_x for these sizes and limits
 * (moegrad_moe_init_routing_max_rows; throws moegrad::Error where it
 * refuses them). */
inline int64_t moe_init_routing_max_rows(int64_t batch, int64_t top_k, int64_t num_experts,
                                         int64_t active_num = MOEGRAD_NO_LIMIT, int64_t capacity = MOEGRAD_NO_LIMIT) {
  int64_t rows = 0;
  check(moegrad_moe_init_routing_max_rows(batch, top_k, num_experts, active_num, capacity, &rows));
  return rows;
}

/* One-shot calls: plan, allocate the workspace, run, free. Without ctx, on
 * the library's default context. */
inline void moe_init_routing(const moegrad_moe_init_routing_args& a, const Context& ctx = Context::default_context()) {
  check(moegrad_moe_init_routing_run(&a, ctx.get()));
}
inline void grouped_matmul(const moegrad_grouped_matmul_args& a, const Context& ctx = Context::default_context()) {
  check(moegrad_grouped_matmul_run(&a, ctx.get()));
}
inline void grouped_matmul_weight_grad(const moegrad_grouped_matmul_weight_grad_args& a,
                                       const Context& ctx = Context::default_context()) {
  check(moegrad_grouped_matmul_weight_grad_run(&a, ctx.get()));
}
inline void moe_init_routing_grad(const moegrad_moe_init_routing_grad_args& a,
                                  const Context& ctx = Context::default_context()) {
  check(moegrad_moe_init_routing_grad_run(&a, ctx.get()));
}

} /* namespace moegrad */

} /* extern "C++" */

#endif /* the C++ wrappers */

#endif /* MOEGRAD_MOEGRAD_LAYER_H_ */
