// Per-tensor checks shared by grad-x's validation (api/validate.cpp) and the
// layer operators (src/ops): one status and one-line message per failure.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "common/dtype.h"
#include "moegrad/moegrad.h"

namespace moegrad {

inline constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // SPEC §4: dims < 2^31

// Element strides of a tensor (compact row-major when DLPack gives none).
struct Layout {
  int64_t shape[3] = {0, 0, 0};
  int64_t stride[3] = {0, 0, 0};
  const std::byte* data = nullptr;
};

// Checks that are the same for every tensor: present, on the CPU, the right
// rank (<= 3), one lane, non-negative dims < 2^31, and every element's offset
// representable. Fills *out.
moegrad_status check_tensor(const DLTensor* t, const char* name, int rank, Layout* out);

// f32, f16 or bf16 (one lane): true and *out set.
bool is_float_dtype(DLDataType t, DType* out);

// int32 or int64, else BAD_DTYPE naming the tensor.
moegrad_status check_index_dtype(const DLTensor* t, const char* name, bool* is_int64);

}  // namespace moegrad
