// A compact row-major CPU DLTensor over memory the caller owns (shape too).
#pragma once

#include <dlpack/dlpack.h>

namespace moegrad::cli {

inline DLTensor make_dl_tensor(void* data, DLDataType dtype, int64_t* shape, int ndim) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

}  // namespace moegrad::cli
