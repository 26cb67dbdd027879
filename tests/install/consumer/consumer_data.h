/* Helpers the C and the C++ consumer share: written in the C99 and C++17
 * subset both compile with -Wall -Wextra -Wpedantic -Werror, using only
 * what an installed moegrad provides (<moegrad/moegrad.h> and DLPack). */
#ifndef MOEGRAD_CONSUMER_DATA_H_
#define MOEGRAD_CONSUMER_DATA_H_

#include <moegrad/moegrad.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A compact row-major CPU tensor over data (NULL strides). */
static inline DLTensor consumer_tensor(void* data, DLDataTypeCode code, int bits, int ndim, int64_t* shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = (uint8_t)code;
  t.dtype.bits = (uint8_t)bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* Fixed-seed values in [-1, 1), exactly representable in f32. */
static inline void consumer_fill(float* v, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = (float)((int32_t)(seed >> 8) - (1 << 23)) / (float)(1 << 23);
  }
}

#endif /* MOEGRAD_CONSUMER_DATA_H_ */
