/* grad_x through moegrad's C API, end to end, on a problem small enough to
 * print.
 *
 * A layer of G = 3 experts, each a [K = 8] -> [N = 6] matmul, and a batch of
 * 4 tokens, each routed to top_k = 2 experts. The forward pass copied every
 * token to its experts, grouped by expert (MoeInitRouting), and ran each
 * expert's matmul on its group (GroupedMatmul). The backward has grad_y, the
 * gradient of the experts' outputs in that grouped ("expanded") row order,
 * and wants grad_x, the gradient of the layer's input tokens:
 *
 *   grad_x[b, k] = sum over the expanded rows i of token b
 *                    sum_n grad_y[i, n] * weight[expert of i, k, n]
 *
 * The steps: describe the caller's buffers as DLTensors; plan (this validates
 * everything and says how much workspace the run needs); run with a
 * workspace the caller owns; destroy the executor. Then one call with a
 * wrong argument, to show an error and that grad_x is left as it was.
 *
 * Built with the project as build/bin/grad_x_example. Against an installed
 * moegrad:
 *   cc -std=c11 grad_x.c $(pkg-config --cflags --libs moegrad) -o grad_x_example
 */
#include <moegrad/moegrad.h>
#include <stdio.h>
#include <stdlib.h>

enum { kBatch = 4, kTopK = 2, kExperts = 3, kK = 8, kN = 6, kM = kBatch * kTopK };

/* The router's choice: token b goes to experts kExpertOf[b][0..top_k). */
static const int64_t kExpertOf[kBatch][kTopK] = {{2, 0}, {1, 2}, {0, 1}, {2, 1}};

/* A compact row-major CPU tensor over a caller's buffer (strides NULL). */
static DLTensor tensor(void* data, uint8_t code, uint8_t bits, int32_t ndim, int64_t* shape) {
  DLTensor t = {0};
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* MoeInitRouting's index, computed here by a stable counting sort: expanded
 * row i holds the token copy at original position p = b * top_k + j
 * (token-major), copies grouped by expert and, within an expert, in
 * ascending p. row_idx[i] = p (row_idx_type 0: expanded -> original);
 * counts[g] = the rows of expert g (group_list_type "count"). */
static void route(int64_t row_idx[kM], int64_t counts[kExperts]) {
  int64_t next[kExperts] = {0};
  for (int g = 0; g < kExperts; ++g) counts[g] = 0;
  for (int p = 0; p < kM; ++p) ++counts[kExpertOf[p / kTopK][p % kTopK]];
  for (int g = 1; g < kExperts; ++g) next[g] = next[g - 1] + counts[g - 1];
  for (int p = 0; p < kM; ++p) row_idx[next[kExpertOf[p / kTopK][p % kTopK]]++] = p;
}

int main(void) {
  float grad_y[kM][kN], weight[kExperts][kK][kN], grad_x[kBatch][kK];
  int64_t row_idx[kM], counts[kExperts];
  route(row_idx, counts);
  /* Multiples of 1/8 and 1/16, so every product and sum below is exact in
   * float32: the check can ask for equality. */
  for (int i = 0; i < kM; ++i)
    for (int n = 0; n < kN; ++n) grad_y[i][n] = (float)((i * 7 + n * 3) % 11 - 5) / 8.0f;
  for (int g = 0; g < kExperts; ++g)
    for (int k = 0; k < kK; ++k)
      for (int n = 0; n < kN; ++n) weight[g][k][n] = (float)((g * 5 + k * 3 + n) % 13 - 6) / 16.0f;

  int64_t gy_shape[2] = {kM, kN}, w_shape[3] = {kExperts, kK, kN}, idx_shape[1] = {kM}, gl_shape[1] = {kExperts};
  int64_t gx_shape[2] = {kBatch, kK};
  DLTensor gy_t = tensor(grad_y, kDLFloat, 32, 2, gy_shape);
  DLTensor w_t = tensor(weight, kDLFloat, 32, 3, w_shape);
  DLTensor idx_t = tensor(row_idx, kDLInt, 64, 1, idx_shape);
  DLTensor gl_t = tensor(counts, kDLInt, 64, 1, gl_shape);
  DLTensor gx_t = tensor(grad_x, kDLFloat, 32, 2, gx_shape);
  moegrad_grad_x_args args = {
      .grad_y = &gy_t,
      .weight = &w_t,
      .expanded_row_idx = &idx_t,
      .group_list = &gl_t,
      .grad_x = &gx_t,
      .batch = kBatch,
      .top_k = kTopK,
      .row_idx_type = MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL,
      .group_list_type = MOEGRAD_GROUP_LIST_COUNT,
  };

  /* A context: threads and ISA path, from MOEGRAD_NUM_THREADS / MOEGRAD_ISA
   * or the machine. One per process is enough; it may be shared. */
  moegrad_context* ctx = NULL;
  if (moegrad_context_create(&ctx) != MOEGRAD_STATUS_SUCCESS) {
    fprintf(stderr, "grad_x_example: %s\n", moegrad_last_error_message());
    return 1;
  }
  int32_t threads = 0;
  moegrad_isa isa = MOEGRAD_ISA_AUTO;
  moegrad_context_get_num_threads(ctx, &threads);
  moegrad_context_get_isa(ctx, &isa);

  /* Phase 1: validate and plan; the executor remembers the plan. */
  size_t workspace_bytes = 0;
  moegrad_executor* executor = NULL;
  moegrad_status st = moegrad_grad_x_get_workspace_size(&args, ctx, &workspace_bytes, &executor);
  if (st != MOEGRAD_STATUS_SUCCESS) {
    fprintf(stderr, "grad_x_example: %s\n", moegrad_last_error_message());
    moegrad_context_destroy(ctx);
    return 1;
  }
  /* Phase 2: run with a workspace of that size (any alignment). */
  void* workspace = malloc(workspace_bytes);
  st = workspace ? moegrad_grad_x(workspace, workspace_bytes, executor, ctx) : MOEGRAD_STATUS_OUT_OF_MEMORY;
  free(workspace);
  moegrad_executor_destroy(executor);
  if (st != MOEGRAD_STATUS_SUCCESS) {
    fprintf(stderr, "grad_x_example: %s\n", moegrad_last_error_message());
    moegrad_context_destroy(ctx);
    return 1;
  }

  printf("moegrad %s: isa %s, %d thread(s)\n", moegrad_version(), moegrad_isa_name(isa), (int)threads);
  printf("routing: expanded_row_idx = {");
  for (int i = 0; i < kM; ++i) printf(i ? ", %lld" : "%lld", (long long)row_idx[i]);
  printf("}, rows per expert = {%lld, %lld, %lld}\n", (long long)counts[0], (long long)counts[1],
         (long long)counts[2]);
  printf("workspace: %zu bytes\n", workspace_bytes);

  /* The same sums by plain loops, in double: expanded row i holds slot
   * p = row_idx[i], that is token p / top_k's copy for expert
   * kExpertOf[p / top_k][p % top_k]. */
  int mismatches = 0;
  printf("grad_x [%d x %d]:\n", kBatch, kK);
  for (int b = 0; b < kBatch; ++b) {
    printf("  token %d:", b);
    for (int k = 0; k < kK; ++k) {
      double want = 0.0;
      for (int i = 0; i < kM; ++i) {
        const int64_t p = row_idx[i], g = kExpertOf[p / kTopK][p % kTopK];
        if (p / kTopK != b) continue;
        for (int n = 0; n < kN; ++n) want += (double)grad_y[i][n] * (double)weight[g][k][n];
      }
      mismatches += (double)grad_x[b][k] != want;
      printf(" %8.4f", grad_x[b][k]);
    }
    printf("\n");
  }
  printf("check against plain loops: %s\n", mismatches ? "MISMATCH" : "equal");

  /* An error: grad_x one column short. The call returns a status, the
   * message says which rule failed, and grad_x is not written. */
  int64_t short_shape[2] = {kBatch, kK - 1};
  DLTensor short_t = tensor(grad_x, kDLFloat, 32, 2, short_shape);
  args.grad_x = &short_t;
  float before = grad_x[0][0];
  st = moegrad_grad_x_run(&args, ctx);
  printf("with grad_x [%d x %d]: %s\n  %s\n", kBatch, kK - 1, moegrad_status_string(st),
         moegrad_last_error_message());
  int error_ok = st != MOEGRAD_STATUS_SUCCESS && grad_x[0][0] == before;

  moegrad_context_destroy(ctx);
  return mismatches == 0 && error_ok ? 0 : 1;
}
