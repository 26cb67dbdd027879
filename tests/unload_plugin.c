/* A plugin of a user's: a shared object that links libmoegrad.a (through
 * moegrad::moegrad_static) and calls grad-x on the default context, whose
 * worker threads then sleep in the archive's code, now the plugin's.
 * unload_test.cpp loads it, calls this, and closes it. */
#include <moegrad/moegrad.h>

#include <stdint.h>

int unload_plugin_run(void) {
  /* batch 4, top_k 1, one expert, K 2, N 3: grad_x[b][k] = sum_n grad_y[b][n] * weight[k][n]. */
  static float grad_y[4][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};
  static float weight[1][2][3] = {{{1, 0, 0}, {0, 0, 1}}};
  static int64_t idx[4] = {0, 1, 2, 3};
  static int64_t counts[1] = {4};
  static float grad_x[4][2];
  int64_t gy_shape[2] = {4, 3}, w_shape[3] = {1, 2, 3}, idx_shape[1] = {4}, gl_shape[1] = {1}, gx_shape[2] = {4, 2};
  const DLDevice cpu = {kDLCPU, 0};
  const DLDataType f32 = {kDLFloat, 32, 1}, i64 = {kDLInt, 64, 1};
  DLTensor t_gy = {grad_y, cpu, 2, f32, gy_shape, 0, 0};
  DLTensor t_w = {weight, cpu, 3, f32, w_shape, 0, 0};
  DLTensor t_idx = {idx, cpu, 1, i64, idx_shape, 0, 0};
  DLTensor t_gl = {counts, cpu, 1, i64, gl_shape, 0, 0};
  DLTensor t_gx = {grad_x, cpu, 2, f32, gx_shape, 0, 0};
  moegrad_grad_x_args args = {&t_gy, &t_w, &t_idx, &t_gl, &t_gx, 4, 1, MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL,
                              MOEGRAD_GROUP_LIST_COUNT};
  const moegrad_status s = moegrad_grad_x_run(&args, 0);
  if (s != MOEGRAD_STATUS_SUCCESS) return (int)s;
  for (int b = 0; b < 4; ++b)  /* column 0 of grad_y, then column 2 */
    if (grad_x[b][0] != grad_y[b][0] || grad_x[b][1] != grad_y[b][2]) return -1;
  return 0;
}
