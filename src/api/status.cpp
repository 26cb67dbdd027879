#include "common/error.h"
#include "kernels/gemm_kernels.h"

extern "C" {

const char* moegrad_status_string(moegrad_status status) {
  switch (status) {
    case MOEGRAD_STATUS_SUCCESS: return "MOEGRAD_STATUS_SUCCESS: no error";
    case MOEGRAD_STATUS_NULL_POINTER: return "MOEGRAD_STATUS_NULL_POINTER: a required pointer is NULL";
    case MOEGRAD_STATUS_WORKSPACE_TOO_SMALL: return "MOEGRAD_STATUS_WORKSPACE_TOO_SMALL: workspace smaller than planned";
    case MOEGRAD_STATUS_EXECUTOR_USED: return "MOEGRAD_STATUS_EXECUTOR_USED: executor already run (single use)";
    case MOEGRAD_STATUS_INVALID_ARGUMENT: return "MOEGRAD_STATUS_INVALID_ARGUMENT: an argument or setting is out of range";
    case MOEGRAD_STATUS_BAD_RANK: return "MOEGRAD_STATUS_BAD_RANK: a tensor has the wrong number of dimensions";
    case MOEGRAD_STATUS_BAD_DTYPE: return "MOEGRAD_STATUS_BAD_DTYPE: unsupported dtype";
    case MOEGRAD_STATUS_DTYPE_MISMATCH: return "MOEGRAD_STATUS_DTYPE_MISMATCH: grad_y and weight dtypes differ";
    case MOEGRAD_STATUS_N_MISMATCH: return "MOEGRAD_STATUS_N_MISMATCH: grad_y.shape[1] != weight.shape[2]";
    case MOEGRAD_STATUS_GROUP_COUNT_MISMATCH: return "MOEGRAD_STATUS_GROUP_COUNT_MISMATCH: group_list.shape[0] != weight.shape[0]";
    case MOEGRAD_STATUS_GRAD_X_SHAPE: return "MOEGRAD_STATUS_GRAD_X_SHAPE: grad_x.shape != [batch, K]";
    case MOEGRAD_STATUS_EMPTY_DIMENSION: return "MOEGRAD_STATUS_EMPTY_DIMENSION: N, K and G must be >= 1";
    case MOEGRAD_STATUS_BAD_BATCH: return "MOEGRAD_STATUS_BAD_BATCH: batch must be > 0";
    case MOEGRAD_STATUS_BAD_TOP_K: return "MOEGRAD_STATUS_BAD_TOP_K: top_k must be > 0";
    case MOEGRAD_STATUS_BAD_ROW_IDX_TYPE: return "MOEGRAD_STATUS_BAD_ROW_IDX_TYPE: row_idx_type must be 0 or 1";
    case MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE: return "MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE: group_list_type must be count (0) or cumsum (1)";
    case MOEGRAD_STATUS_SIZE_OVERFLOW: return "MOEGRAD_STATUS_SIZE_OVERFLOW: a size or offset overflows";
    case MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT: return "MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT: a group count is negative";
    case MOEGRAD_STATUS_GROUP_SUM_MISMATCH: return "MOEGRAD_STATUS_GROUP_SUM_MISMATCH: group counts do not sum to M";
    case MOEGRAD_STATUS_CUMSUM_DECREASING: return "MOEGRAD_STATUS_CUMSUM_DECREASING: cumsum group list decreases";
    case MOEGRAD_STATUS_M_EXCEEDS_SLOTS: return "MOEGRAD_STATUS_M_EXCEEDS_SLOTS: M > batch * top_k";
    case MOEGRAD_STATUS_INDEX_TOO_SHORT: return "MOEGRAD_STATUS_INDEX_TOO_SHORT: row_idx_type 0 needs L >= M";
    case MOEGRAD_STATUS_INDEX_TOO_LONG: return "MOEGRAD_STATUS_INDEX_TOO_LONG: row_idx_type 1 needs L <= batch * top_k";
    case MOEGRAD_STATUS_INDEX_OUT_OF_RANGE: return "MOEGRAD_STATUS_INDEX_OUT_OF_RANGE: an index is outside its range and not -1";
    case MOEGRAD_STATUS_DUPLICATE_INDEX: return "MOEGRAD_STATUS_DUPLICATE_INDEX: an expanded row is claimed twice";
    case MOEGRAD_STATUS_BAD_LAYOUT: return "MOEGRAD_STATUS_BAD_LAYOUT: unsupported tensor layout";
    case MOEGRAD_STATUS_UNSUPPORTED_DEVICE: return "MOEGRAD_STATUS_UNSUPPORTED_DEVICE: tensors must be on kDLCPU";
    case MOEGRAD_STATUS_ISA_UNAVAILABLE: return "MOEGRAD_STATUS_ISA_UNAVAILABLE: this CPU cannot run the requested ISA";
    case MOEGRAD_STATUS_OUT_OF_MEMORY: return "MOEGRAD_STATUS_OUT_OF_MEMORY: allocation failed, or the worker threads could not start";
    case MOEGRAD_STATUS_INTERNAL: return "MOEGRAD_STATUS_INTERNAL: internal error (a bug)";
    /* layer operators (moegrad_layer.h) */
    case MOEGRAD_STATUS_EXECUTOR_KIND: return "MOEGRAD_STATUS_EXECUTOR_KIND: executor was planned for another operator";
    case MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE: return "MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE: an expert index is outside [0, G)";
    case MOEGRAD_STATUS_BAD_ACTIVE_NUM: return "MOEGRAD_STATUS_BAD_ACTIVE_NUM: active_num must be -1 (no limit) or >= 0";
    case MOEGRAD_STATUS_BAD_CAPACITY: return "MOEGRAD_STATUS_BAD_CAPACITY: capacity must be -1 (no limit) or >= 0";
    case MOEGRAD_STATUS_OUTPUT_SHAPE: return "MOEGRAD_STATUS_OUTPUT_SHAPE: an output's shape differs from what the inputs imply";
    case MOEGRAD_STATUS_BATCH_MISMATCH: return "MOEGRAD_STATUS_BATCH_MISMATCH: expert_idx.shape[0] != x.shape[0]";
    case MOEGRAD_STATUS_K_MISMATCH: return "MOEGRAD_STATUS_K_MISMATCH: x.shape[1] != weight.shape[1]";
    case MOEGRAD_STATUS_M_MISMATCH: return "MOEGRAD_STATUS_M_MISMATCH: x.shape[0] != grad_y.shape[0]";
    case MOEGRAD_STATUS_ACCUMULATE_NEEDS_F32: return "MOEGRAD_STATUS_ACCUMULATE_NEEDS_F32: accumulating needs a float32 grad_weight";
    case MOEGRAD_STATUS_BAD_ACCUMULATE: return "MOEGRAD_STATUS_BAD_ACCUMULATE: accumulate must be 0 or 1";
    case MOEGRAD_STATUS_ALIASING: return "MOEGRAD_STATUS_ALIASING: an output, or the workspace, overlaps another tensor";
  }
  return "MOEGRAD_STATUS_UNKNOWN: not a moegrad status";
}

const char* moegrad_last_error_message(void) { return moegrad::last_error_message(); }

const char* moegrad_version(void) { return MOEGRAD_VERSION_STRING; }

const char* moegrad_isa_name(moegrad_isa isa) {
  switch (isa) {
    case MOEGRAD_ISA_AUTO: return "auto";
    case MOEGRAD_ISA_SCALAR: return "scalar";
    case MOEGRAD_ISA_AVX2: return "avx2";
    case MOEGRAD_ISA_AVX512: return "avx512";
  }
  return "unknown";
}

int moegrad_isa_available(moegrad_isa isa) {
  if (isa == MOEGRAD_ISA_AUTO) return 1;
  return moegrad::kernels::gemm_kernels_for(isa) != nullptr ? 1 : 0;
}

}  // extern "C"
