/*
 * moegrad — the fused, deterministic input gradient of a Mixture-of-Experts
 * expert layer (MoeInitRouting + GroupedMatmul backward), public C API.
 *
 *   grad_x[b, k] = sum over expanded rows i of token b (ascending i) of
 *                  sum_{n=0}^{N-1} grad_y[i, n] * weight[g(i), k, n]
 *
 * The contract (shapes, index semantics, errors, bitwise determinism) is
 * SPEC.md; README.md explains it with examples.
 *
 * Two phases, as in aclnn/cuDNN:
 *
 *   size_t ws_bytes; moegrad_executor* ex;
 *   moegrad_grad_x_get_workspace_size(&args, ctx, &ws_bytes, &ex);  // validate + plan
 *   moegrad_grad_x(ws, ws_bytes, ex, ctx);                           // run
 *   moegrad_executor_destroy(ex);
 *
 * An executor is single-use: a second moegrad_grad_x() on it, after one that
 * succeeded or while one is running on another thread, fails with
 * MOEGRAD_STATUS_EXECUTOR_USED. Index and group-list
 * *contents* are checked by moegrad_grad_x() before grad_x is written; on any
 * error grad_x is untouched, and the executor stays unused (the contents,
 * once fixed, can be run).
 *
 * Every function returns a moegrad_status; on failure a one-line message
 * naming the problem is available from moegrad_last_error_message() on the
 * calling thread.
 */
#ifndef MOEGRAD_MOEGRAD_H_
#define MOEGRAD_MOEGRAD_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MOEGRAD_API __attribute__((visibility("default")))
#else
#define MOEGRAD_API
#endif

#define MOEGRAD_VERSION_MAJOR 0
#define MOEGRAD_VERSION_MINOR 1
#define MOEGRAD_VERSION_PATCH 0
#define MOEGRAD_VERSION_STRING "0.1.0"

/* One status per distinct constraint (SPEC §4), so callers can branch on it. */
typedef enum moegrad_status {
  MOEGRAD_STATUS_SUCCESS = 0,
  /* §4.9 and API misuse */
  MOEGRAD_STATUS_NULL_POINTER = 1,          /* a required pointer argument or tensor data is NULL */
  MOEGRAD_STATUS_WORKSPACE_TOO_SMALL = 2,   /* workspace_bytes < the size get_workspace_size reported */
  MOEGRAD_STATUS_EXECUTOR_USED = 3,         /* an executor was run a second time */
  MOEGRAD_STATUS_INVALID_ARGUMENT = 4,      /* a context setting out of range, bad env variable */
  /* §4.1 */
  MOEGRAD_STATUS_BAD_RANK = 10,             /* a tensor has the wrong number of dimensions */
  /* §4.2 */
  MOEGRAD_STATUS_BAD_DTYPE = 11,            /* a dtype outside the supported set */
  MOEGRAD_STATUS_DTYPE_MISMATCH = 12,       /* grad_y and weight dtypes differ */
  /* §4.3, §4.4 */
  MOEGRAD_STATUS_N_MISMATCH = 13,           /* grad_y.shape[1] != weight.shape[2] */
  MOEGRAD_STATUS_GROUP_COUNT_MISMATCH = 14, /* group_list.shape[0] != weight.shape[0] */
  MOEGRAD_STATUS_GRAD_X_SHAPE = 15,         /* grad_x.shape != [batch, K] */
  MOEGRAD_STATUS_EMPTY_DIMENSION = 16,      /* N, K or G is 0 */
  /* §4.5 */
  MOEGRAD_STATUS_BAD_BATCH = 20,            /* batch <= 0 */
  MOEGRAD_STATUS_BAD_TOP_K = 21,            /* top_k <= 0 */
  MOEGRAD_STATUS_BAD_ROW_IDX_TYPE = 22,     /* row_idx_type not 0 or 1 */
  MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE = 23,  /* group_list_type not count or cumsum */
  MOEGRAD_STATUS_SIZE_OVERFLOW = 24,        /* batch*top_k, a dimension or an offset overflows */
  /* §4.6 */
  MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT = 30, /* a group count < 0 */
  MOEGRAD_STATUS_GROUP_SUM_MISMATCH = 31,   /* sum of counts (or last cumsum) != M */
  MOEGRAD_STATUS_CUMSUM_DECREASING = 32,    /* cumsum group list decreases */
  /* §4.7 */
  MOEGRAD_STATUS_M_EXCEEDS_SLOTS = 40,      /* M > batch * top_k */
  MOEGRAD_STATUS_INDEX_TOO_SHORT = 41,      /* row_idx_type 0 and L < M */
  MOEGRAD_STATUS_INDEX_TOO_LONG = 42,       /* row_idx_type 1 and L > batch * top_k */
  /* §4.8 */
  MOEGRAD_STATUS_INDEX_OUT_OF_RANGE = 50,   /* an index value outside its range and not -1 */
  MOEGRAD_STATUS_DUPLICATE_INDEX = 51,      /* row_idx_type 1 claims one expanded row twice */
  /* layout and environment */
  MOEGRAD_STATUS_BAD_LAYOUT = 60,           /* grad_x strides (of dimensions longer than 1) not
                                               positive or that may overlap (each,
                                               smallest first, must exceed the span of the smaller
                                               ones), a negative shape, data + byte_offset not aligned
                                               to the element (of a dtype that tensor may have;
                                               another dtype is BAD_DTYPE), lanes != 1 */
  MOEGRAD_STATUS_UNSUPPORTED_DEVICE = 61,   /* a tensor not on kDLCPU */
  MOEGRAD_STATUS_ISA_UNAVAILABLE = 62,      /* a forced ISA this CPU (or OS) lacks */
  MOEGRAD_STATUS_OUT_OF_MEMORY = 63,        /* an allocation failed, or the OS would not start the
                                               context's worker threads (the message says which; a
                                               run on a context left without them tries again) */
  MOEGRAD_STATUS_INTERNAL = 99,             /* a bug: please report it */

  /* ---- layer operators (moegrad_layer.h), numbered from 100 ------------ */
  MOEGRAD_STATUS_EXECUTOR_KIND = 100,        /* executor planned for another operator */
  MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE = 101,  /* an expert_idx value outside [0, G) */
  MOEGRAD_STATUS_BAD_ACTIVE_NUM = 102,       /* active_num < -1 */
  MOEGRAD_STATUS_BAD_CAPACITY = 103,         /* capacity < -1 */
  MOEGRAD_STATUS_OUTPUT_SHAPE = 104,         /* an output's shape differs from what the inputs imply */
  MOEGRAD_STATUS_BATCH_MISMATCH = 105,       /* expert_idx.shape[0] != x.shape[0] */
  MOEGRAD_STATUS_K_MISMATCH = 106,           /* x.shape[1] != weight.shape[1] */
  MOEGRAD_STATUS_M_MISMATCH = 107,           /* x.shape[0] != grad_y.shape[0] */
  MOEGRAD_STATUS_ACCUMULATE_NEEDS_F32 = 108, /* accumulate into a grad_weight that is not float32 */
  MOEGRAD_STATUS_BAD_ACCUMULATE = 109,       /* accumulate not 0 or 1 */
  MOEGRAD_STATUS_ALIASING = 110              /* an output's address range (grad_x's too, first to last
                                                byte) overlaps an input's or another output's, or
                                                the workspace overlaps a tensor of the call */
} moegrad_status;

/* Instruction-set paths. All give bitwise identical grad_x (SPEC §5; every
 * NaN element is stored as the one NaN 0x7fc00000, whichever NaNs met). */
typedef enum moegrad_isa {
  MOEGRAD_ISA_AUTO = 0,   /* the best path this CPU supports */
  MOEGRAD_ISA_SCALAR = 1, /* portable C++, the executable definition of the order */
  MOEGRAD_ISA_AVX2 = 2,   /* AVX2 + FMA + F16C */
  MOEGRAD_ISA_AVX512 = 3  /* AVX-512F (+ F16C) */
} moegrad_isa;

typedef enum moegrad_group_list_type {
  MOEGRAD_GROUP_LIST_COUNT = 0, /* group_list[g] = rows of expert g */
  MOEGRAD_GROUP_LIST_CUMSUM = 1 /* group_list[g] = rows of experts 0..g */
} moegrad_group_list_type;

typedef enum moegrad_row_idx_type {
  MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL = 0, /* idx[i] = original position of expanded row i */
  MOEGRAD_ROW_IDX_ORIGINAL_TO_EXPANDED = 1  /* idx[p] = expanded row of original position p */
} moegrad_row_idx_type;

/* Status name and meaning, e.g. "MOEGRAD_STATUS_N_MISMATCH: ...". Never NULL. */
MOEGRAD_API const char* moegrad_status_string(moegrad_status status);

/* The message of the last failed call on this thread: "" before any failure,
 * and again after a successful planning or run call (get_workspace_size, a
 * run, a one-shot *_run, and moegrad_moe_init_routing_max_rows, which
 * validates as planning does); other successful calls (context setters,
 * getters, destroy calls) leave it as it was. The pointer stays valid until
 * the next moegrad call on this thread. */
MOEGRAD_API const char* moegrad_last_error_message(void);

/* "0.1.0" */
MOEGRAD_API const char* moegrad_version(void);

/* Name of an ISA ("auto", "scalar", "avx2", "avx512"). */
MOEGRAD_API const char* moegrad_isa_name(moegrad_isa isa);

/* 1 if this CPU and OS can run the given path (AUTO and SCALAR always can). */
MOEGRAD_API int moegrad_isa_available(moegrad_isa isa);

/* ---- context --------------------------------------------------------------
 * A context holds a thread pool and the settings a run uses. Its threads
 * start at its first run or its first moegrad_context_set_num_threads call,
 * whichever comes first, and again when a later call asks for another
 * count (so a count set before running is the only one started). They
 * inherit the CPU affinity mask of the thread that starts them.
 * Defaults come from the environment when it is created:
 *   MOEGRAD_NUM_THREADS=N     (N >= 1; default: the CPUs in the creating
 *     thread's affinity mask, i.e. what taskset, a cpuset or an OpenMP
 *     runtime's thread binding allows that thread, and at most the CPU time
 *     limit of the creating thread's cgroup and of its ancestors its cgroup
 *     mount shows, rounded up: docker run --cpus, a Kubernetes CPU limit)
 *   MOEGRAD_ISA=auto|scalar|avx2|avx512
 *   MOEGRAD_ENGINE=auto|packed|rowvec   (the GEMM engine; speed only)
 *   MOEGRAD_L1D_BYTES=B, MOEGRAD_L2_BYTES=B   (per-core data caches the
 *     blocking is fitted to; default: what the OS reports; speed only)
 * An invalid value or a forced ISA this CPU lacks makes moegrad_context_create
 * fail with a clear message. A context may be used from several threads at
 * once: runs on one context take turns on its worker threads, except that a
 * run started after moegrad_context_set_num_threads changed the count may
 * overlap one still finishing on the previous workers (runs that write the
 * same output are the caller's race either way). It must not be destroyed
 * while another thread may still call a function on it. No function is
 * async-signal-safe. */
typedef struct moegrad_context moegrad_context;

MOEGRAD_API moegrad_status moegrad_context_create(moegrad_context** ctx);
MOEGRAD_API void moegrad_context_destroy(moegrad_context* ctx);
/* The most threads a context runs (more: INVALID_ARGUMENT). */
#define MOEGRAD_MAX_THREADS 4096
/* 1..MOEGRAD_MAX_THREADS; 0 restores the default. */
MOEGRAD_API moegrad_status moegrad_context_set_num_threads(moegrad_context* ctx, int32_t num_threads);
MOEGRAD_API moegrad_status moegrad_context_get_num_threads(const moegrad_context* ctx, int32_t* num_threads);
/* Force an ISA path; ISA_UNAVAILABLE if the CPU lacks it. AUTO selects the best
 * path this CPU runs, whatever MOEGRAD_ISA said when the context was created
 * (unlike 0 threads, which restores MOEGRAD_NUM_THREADS's count). */
MOEGRAD_API moegrad_status moegrad_context_set_isa(moegrad_context* ctx, moegrad_isa isa);
/* The path a run on this context uses (never AUTO). */
MOEGRAD_API moegrad_status moegrad_context_get_isa(const moegrad_context* ctx, moegrad_isa* isa);
/* Opt-in fast bf16 mode for bf16 inputs: AVX512_BF16 pair dot-products,
 * outside SPEC §5's order but reproducible across threads and runs (the order
 * is in README.md). 0 = exact (default). Planning a bf16 problem in this mode
 * fails with MOEGRAD_STATUS_ISA_UNAVAILABLE unless the context's ISA is avx512
 * on a CPU with AVX512_BF16, or scalar (which runs an exact emulation of the
 * instruction's order); it is never silently replaced by the exact mode.
 * f32/f16 inputs ignore it. moegrad_grad_x and the GEMMs of moegrad_layer.h
 * (grouped_matmul and its weight grad) read it. */
MOEGRAD_API moegrad_status moegrad_context_set_fast_bf16(moegrad_context* ctx, int32_t enable);

/* ---- grad-x ---------------------------------------------------------------- */

/* Inputs, attributes and the output of the operator. Tensors must stay valid
 * (the structs need not) until the run finishes. Strides in elements; NULL
 * strides mean compact row-major; a tensor without elements may have NULL
 * data. grad_x is [batch, K] float32. */
typedef struct moegrad_grad_x_args {
  const DLTensor* grad_y;           /* [M, N]    f32 | f16 | bf16 */
  const DLTensor* weight;           /* [G, K, N] same dtype as grad_y */
  const DLTensor* expanded_row_idx; /* [L]       int32 | int64 */
  const DLTensor* group_list;       /* [G]       int32 | int64 */
  const DLTensor* grad_x;           /* [batch, K] float32, output; its address range (first to last
                                       byte) must not overlap an input's */
  int64_t batch;                    /* > 0 */
  int64_t top_k;                    /* > 0 */
  int32_t row_idx_type;             /* moegrad_row_idx_type */
  int32_t group_list_type;          /* moegrad_group_list_type */
} moegrad_grad_x_args;

typedef struct moegrad_executor moegrad_executor;

/* Validates shapes, dtypes and attributes, plans tiling and the schedule for
 * ctx (NULL: a default context from the environment), and reports the exact
 * workspace size. On success *executor must later be freed with
 * moegrad_executor_destroy. *workspace_bytes is never 0 after a success in
 * this version (it includes the slack to align the regions); where it is 0,
 * workspace may be NULL. On failure *workspace_bytes is 0 and *executor
 * NULL (both set right after the check that neither pointer is NULL). */
MOEGRAD_API moegrad_status moegrad_grad_x_get_workspace_size(const moegrad_grad_x_args* args,
                                                             const moegrad_context* ctx,
                                                             size_t* workspace_bytes,
                                                             moegrad_executor** executor);

/* Runs a planned executor. The ISA path and numeric mode are those of the
 * planning context; ctx (NULL: the default context) supplies the threads, at
 * most as many as were planned. Validates index and group-list contents
 * before writing grad_x. The workspace need not be initialised or aligned;
 * its first workspace_bytes-as-reported bytes must share none with a tensor
 * of the call (MOEGRAD_STATUS_ALIASING). */
MOEGRAD_API moegrad_status moegrad_grad_x(void* workspace, size_t workspace_bytes,
                                          moegrad_executor* executor, const moegrad_context* ctx);

MOEGRAD_API void moegrad_executor_destroy(moegrad_executor* executor);

/* One-shot convenience: plan, allocate the workspace, run, free. */
MOEGRAD_API moegrad_status moegrad_grad_x_run(const moegrad_grad_x_args* args, const moegrad_context* ctx);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MOEGRAD_MOEGRAD_H_ */
