/* A C program built against an installed moegrad (find_package or
 * pkg-config, tests/install/install_test.sh): it uses only the public
 * headers and libmoegrad.so or libmoegrad.a, as a user's code would.
 *
 * The problem is small and written out by hand: batch 3, top_k 2, G 3
 * experts (expert 1 gets no row), K 5, N 4. Routing (token-major positions
 * p = b*top_k + j):
 *
 *   expert_idx = {{2, 0}, {0, 2}, {2, 0}}
 *   expert 0 takes p = 1, 2, 5; expert 2 takes p = 0, 3, 4 (stable in p), so
 *   expanded_row_idx (expanded -> original) = {1, 2, 5, 0, 3, 4} and the
 *   group counts are {3, 0, 3}.
 *
 * It checks, against float64 loops over that table: moe_init_routing's
 * index and counts, grad_x within SPEC's bound, and that a bad argument is
 * refused with its status and message while grad_x keeps its NaNs. Exit 0
 * on success; each failure prints one line. */
#include <math.h>
#include <moegrad/moegrad.h>
#include <moegrad/moegrad_layer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer_data.h"

enum { kBatch = 3, kTopK = 2, kExperts = 3, kK = 5, kN = 4, kM = kBatch * kTopK };

static const int64_t kExpertIdx[kBatch][kTopK] = {{2, 0}, {0, 2}, {2, 0}};
static const int64_t kRowIdx[kM] = {1, 2, 5, 0, 3, 4};
static const int64_t kCounts[kExperts] = {3, 0, 3};

static int failures = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "consumer.c:%d: ", __LINE__);        \
      fprintf(stderr, __VA_ARGS__);                        \
      fputc('\n', stderr);                                 \
      ++failures;                                          \
    }                                                      \
  } while (0)

static void check_routing(moegrad_context* ctx) {
  float x[kBatch * kK], expanded_x[kM * kK];
  int64_t row_idx[kM], counts[kExperts], num_rows = -1;
  int64_t x_shape[2] = {kBatch, kK}, e_shape[2] = {kBatch, kTopK}, ex_shape[2] = {kM, kK};
  int64_t idx_shape[1] = {kM}, gl_shape[1] = {kExperts};
  consumer_fill(x, kBatch * kK, 7u);
  DLTensor x_t = consumer_tensor(x, kDLFloat, 32, 2, x_shape);
  DLTensor e_t = consumer_tensor((void*)kExpertIdx, kDLInt, 64, 2, e_shape);
  DLTensor ex_t = consumer_tensor(expanded_x, kDLFloat, 32, 2, ex_shape);
  DLTensor idx_t = consumer_tensor(row_idx, kDLInt, 64, 1, idx_shape);
  DLTensor gl_t = consumer_tensor(counts, kDLInt, 64, 1, gl_shape);
  moegrad_moe_init_routing_args a = {&x_t, &e_t, &ex_t, &idx_t, &gl_t, MOEGRAD_NO_LIMIT, MOEGRAD_NO_LIMIT,
                                     MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL, &num_rows};
  moegrad_status st = moegrad_moe_init_routing_run(&a, ctx);
  CHECK(st == MOEGRAD_STATUS_SUCCESS, "moe_init_routing: %s", moegrad_last_error_message());
  if (st != MOEGRAD_STATUS_SUCCESS) return;
  CHECK(num_rows == kM, "moe_init_routing: num_rows %lld, expected %d", (long long)num_rows, kM);
  for (int i = 0; i < kM; ++i) {
    CHECK(row_idx[i] == kRowIdx[i], "moe_init_routing: row_idx[%d] = %lld, expected %lld", i,
          (long long)row_idx[i], (long long)kRowIdx[i]);
    for (int k = 0; k < kK; ++k) {
      const float want = x[(kRowIdx[i] / kTopK) * kK + k];
      CHECK(memcmp(&expanded_x[i * kK + k], &want, sizeof want) == 0, "moe_init_routing: expanded_x[%d][%d]", i, k);
    }
  }
  for (int g = 0; g < kExperts; ++g)
    CHECK(counts[g] == kCounts[g], "moe_init_routing: count[%d] = %lld, expected %lld", g, (long long)counts[g],
          (long long)kCounts[g]);
}

static void check_grad_x(moegrad_context* ctx) {
  float grad_y[kM * kN], weight[kExperts * kK * kN], grad_x[kBatch * kK];
  int64_t gy_shape[2] = {kM, kN}, w_shape[3] = {kExperts, kK, kN}, gx_shape[2] = {kBatch, kK};
  int64_t idx_shape[1] = {kM}, gl_shape[1] = {kExperts};
  consumer_fill(grad_y, kM * kN, 11u);
  consumer_fill(weight, kExperts * kK * kN, 13u);
  for (int i = 0; i < kBatch * kK; ++i) grad_x[i] = NAN;
  DLTensor gy_t = consumer_tensor(grad_y, kDLFloat, 32, 2, gy_shape);
  DLTensor w_t = consumer_tensor(weight, kDLFloat, 32, 3, w_shape);
  DLTensor idx_t = consumer_tensor((void*)kRowIdx, kDLInt, 64, 1, idx_shape);
  DLTensor gl_t = consumer_tensor((void*)kCounts, kDLInt, 64, 1, gl_shape);
  DLTensor gx_t = consumer_tensor(grad_x, kDLFloat, 32, 2, gx_shape);
  moegrad_grad_x_args args = {&gy_t, &w_t, &idx_t, &gl_t, &gx_t, kBatch, kTopK,
                              MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL, MOEGRAD_GROUP_LIST_COUNT};

  /* A refused argument: its own status, a message, grad_x untouched. */
  args.top_k = 0;
  size_t ws_bytes = 0;
  moegrad_executor* ex = NULL;
  moegrad_status st = moegrad_grad_x_get_workspace_size(&args, ctx, &ws_bytes, &ex);
  CHECK(st == MOEGRAD_STATUS_BAD_TOP_K, "top_k 0: status %d (%s)", (int)st, moegrad_status_string(st));
  CHECK(strstr(moegrad_last_error_message(), "top_k") != NULL, "top_k 0: message '%s'",
        moegrad_last_error_message());
  for (int i = 0; i < kBatch * kK; ++i) CHECK(isnan(grad_x[i]), "top_k 0: grad_x[%d] was written", i);
  args.top_k = kTopK;

  /* The two phases, with a workspace this program owns. */
  st = moegrad_grad_x_get_workspace_size(&args, ctx, &ws_bytes, &ex);
  CHECK(st == MOEGRAD_STATUS_SUCCESS, "plan: %s", moegrad_last_error_message());
  if (st != MOEGRAD_STATUS_SUCCESS) return;
  void* ws = ws_bytes > 0 ? malloc(ws_bytes) : NULL;
  CHECK(ws_bytes == 0 || ws != NULL, "malloc(%zu)", ws_bytes);
  st = moegrad_grad_x(ws, ws_bytes, ex, ctx);
  CHECK(st == MOEGRAD_STATUS_SUCCESS, "run: %s", moegrad_last_error_message());
  st = moegrad_grad_x(ws, ws_bytes, ex, ctx);
  CHECK(st == MOEGRAD_STATUS_EXECUTOR_USED, "second run: status %d", (int)st);
  free(ws);
  moegrad_executor_destroy(ex);

  /* float64 reference, and SPEC's bound (N + top_k) * 2^-24 * sum |terms|. */
  int expert_of_row[kM], row = 0;
  for (int g = 0; g < kExperts; ++g)
    for (int64_t c = 0; c < kCounts[g]; ++c) expert_of_row[row++] = g;
  for (int b = 0; b < kBatch; ++b) {
    for (int k = 0; k < kK; ++k) {
      double ref = 0.0, abs_sum = 0.0;
      for (int i = 0; i < kM; ++i) {
        if (kRowIdx[i] / kTopK != b) continue;
        for (int n = 0; n < kN; ++n) {
          const double term = (double)grad_y[i * kN + n] * (double)weight[(expert_of_row[i] * kK + k) * kN + n];
          ref += term;
          abs_sum += fabs(term);
        }
      }
      const double bound = (kN + kTopK) * ldexp(1.0, -24) * abs_sum;
      const double got = grad_x[b * kK + k];
      CHECK(fabs(got - ref) <= bound, "grad_x[%d][%d] = %.9g, float64 %.9g, bound %.3g", b, k, got, ref, bound);
    }
  }
}

int main(void) {
  CHECK(strcmp(moegrad_version(), MOEGRAD_VERSION_STRING) == 0, "library %s, header %s", moegrad_version(),
        MOEGRAD_VERSION_STRING);
#ifdef EXPECTED_VERSION
  CHECK(strcmp(MOEGRAD_VERSION_STRING, EXPECTED_VERSION) == 0, "header %s, package %s", MOEGRAD_VERSION_STRING,
        EXPECTED_VERSION);
#endif
  moegrad_context* ctx = NULL;
  moegrad_status st = moegrad_context_create(&ctx);
  CHECK(st == MOEGRAD_STATUS_SUCCESS, "context: %s", moegrad_last_error_message());
  if (st != MOEGRAD_STATUS_SUCCESS) return 1;
  check_routing(ctx);
  check_grad_x(ctx);
  moegrad_context_destroy(ctx);
  if (failures == 0) printf("consumer.c: moegrad %s OK\n", moegrad_version());
  return failures == 0 ? 0 : 1;
}
