#include "api/tensor_check.h"

#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <utility>

#include "common/error.h"

namespace moegrad {

moegrad_status check_tensor(const DLTensor* t, const char* name, int rank, Elements elements, Layout* out) {
  if (t == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "%s: tensor pointer is NULL", name);
  if (t->device.device_type != kDLCPU)
    return fail(MOEGRAD_STATUS_UNSUPPORTED_DEVICE, "%s: device_type %d is not kDLCPU (%d)", name,
                static_cast<int>(t->device.device_type), static_cast<int>(kDLCPU));
  if (t->ndim != rank)
    return fail(MOEGRAD_STATUS_BAD_RANK, "%s must be %d-D, got ndim=%d", name, rank, t->ndim);
  if (t->dtype.lanes != 1)
    return fail(MOEGRAD_STATUS_BAD_LAYOUT, "%s: dtype lanes=%u, only 1 is supported", name,
                static_cast<unsigned>(t->dtype.lanes));
  if (t->shape == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "%s: shape is NULL", name);
  bool empty = false;
  for (int d = 0; d < rank; ++d) {
    const int64_t n = t->shape[d];
    if (n < 0)
      return fail(MOEGRAD_STATUS_BAD_LAYOUT, "%s: shape[%d]=%" PRId64 " is negative", name, d, n);
    if (n > kMaxDim)
      return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "%s: shape[%d]=%" PRId64 " exceeds 2^31-1", name, d, n);
    out->shape[d] = n;
    empty = empty || n == 0;
  }
  // Strides: given, or compact row-major. Only compact strides are products
  // of the shape; given ones are bounded by the span check below (a
  // broadcast tensor may count more elements than int64 holds, at offset 0).
  int64_t compact = 1;
  for (int d = rank - 1; d >= 0; --d) {
    out->stride[d] = t->strides != nullptr ? t->strides[d] : compact;
    if (t->strides == nullptr && __builtin_mul_overflow(compact, out->shape[d] == 0 ? 1 : out->shape[d], &compact))
      return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "%s: element count overflows int64", name);
    // A dimension of one element is never stepped along, so its stride may
    // be anything and the span check below does not bound it; the drivers
    // still scale every stride to bytes up front. Beyond 2^31 - 1 elements
    // it is taken as 0, which keeps that product (and a prefetch a few
    // steps on) far inside int64.
    if (out->shape[d] == 1 && (out->stride[d] > kMaxDim || out->stride[d] < -kMaxDim)) out->stride[d] = 0;
  }
  const int64_t elem_bytes = (t->dtype.bits + 7) / 8;
  // byte_offset is unsigned in DLPack; a "negative" one (2^64 - x) would
  // wrap the address around, so it must fit in int64 like every offset.
  if (t->byte_offset > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "%s: byte_offset=%" PRIu64 " exceeds 2^63-1", name, t->byte_offset);
  if (!empty) {
    // The elements span [data + byte_offset + lo, data + byte_offset + hi]
    // bytes (lo <= 0 from negative strides): every bound must fit in int64
    // and the span must not wrap around the address space.
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < rank; ++d) {
      int64_t span = 0;
      if (__builtin_mul_overflow(out->stride[d], out->shape[d] - 1, &span) ||
          __builtin_mul_overflow(span, elem_bytes, &span) ||
          __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
        return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "%s: element offsets overflow int64", name);
    }
    if (t->data == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "%s: data is NULL", name);
    const auto base = reinterpret_cast<uintptr_t>(t->data);
    uintptr_t first = 0, last = 0;
    if (__builtin_add_overflow(base, static_cast<uintptr_t>(t->byte_offset), &first) ||
        first < static_cast<uintptr_t>(-(lo + 1)) + 1u || __builtin_add_overflow(first, static_cast<uintptr_t>(hi), &last) ||
        __builtin_add_overflow(last, static_cast<uintptr_t>(elem_bytes), &last))
      return fail(MOEGRAD_STATUS_SIZE_OVERFLOW, "%s: data + byte_offset + element offsets wrap the address space", name);
  }
  // An empty tensor's data may be NULL, and NULL plus an offset is undefined
  // behaviour: its address is checked as an integer and it gets no pointer.
  const uintptr_t address = reinterpret_cast<uintptr_t>(t->data) + static_cast<uintptr_t>(t->byte_offset);
  out->data = t->data == nullptr ? nullptr : static_cast<const std::byte*>(t->data) + t->byte_offset;
  DType float_type = DType::kF32;
  bool known = false;
  switch (elements) {
    case Elements::kFloat: known = is_float_dtype(t->dtype, &float_type); break;
    case Elements::kF32: known = is_float_dtype(t->dtype, &float_type) && float_type == DType::kF32; break;
    case Elements::kIndex: known = is_index_dtype(t->dtype, nullptr); break;
  }
  if (known && address % static_cast<uintptr_t>(elem_bytes) != 0)
    return fail(MOEGRAD_STATUS_BAD_LAYOUT, "%s: data + byte_offset is not aligned to its %" PRId64
                "-byte elements", name, elem_bytes);
  return MOEGRAD_STATUS_SUCCESS;
}

bool is_float_dtype(DLDataType t, DType* out) {
  if (t.code == kDLFloat && t.bits == 32) { *out = DType::kF32; return true; }
  if (t.code == kDLFloat && t.bits == 16) { *out = DType::kF16; return true; }
  if (t.code == kDLBfloat && t.bits == 16) { *out = DType::kBF16; return true; }
  return false;
}

DTypeText dtype_text(DLDataType t) {
  DTypeText out{};
  const unsigned code = t.code, bits = t.bits, lanes = t.lanes;
  const char* kind = nullptr;
  switch (code) {
    case kDLInt: kind = "int"; break;
    case kDLUInt: kind = "uint"; break;
    case kDLFloat: kind = "float"; break;
    case kDLBfloat: kind = "bfloat"; break;
    case kDLComplex: kind = "complex"; break;
    default: break;
  }
  int n = 0;
  if (kind != nullptr) {
    n = std::snprintf(out.text, sizeof out.text, "%s%u", kind, bits);
  } else if (code == 6 && bits == 8) {  // kDLBool, DLPack 0.8 and later
    n = std::snprintf(out.text, sizeof out.text, "bool");
  } else {
    n = std::snprintf(out.text, sizeof out.text, "(DLPack code %u, %u bits)", code, bits);
  }
  if (lanes > 1 && n > 0 && static_cast<size_t>(n) < sizeof out.text)
    std::snprintf(out.text + n, sizeof out.text - static_cast<size_t>(n), " x %u lanes", lanes);
  return out;
}

moegrad_status check_float_dtype(const DLTensor* t, const char* name, DType* out) {
  if (is_float_dtype(t->dtype, out)) return MOEGRAD_STATUS_SUCCESS;
  return fail(MOEGRAD_STATUS_BAD_DTYPE, "%s: dtype %s must be float32, float16 or bfloat16", name,
              dtype_text(t->dtype).text);
}

bool is_index_dtype(DLDataType t, bool* is_int64) {
  if (t.code != kDLInt || (t.bits != 32 && t.bits != 64)) return false;
  if (is_int64 != nullptr) *is_int64 = t.bits == 64;
  return true;
}

moegrad_status check_index_dtype(const DLTensor* t, const char* name, bool* is_int64) {
  if (is_index_dtype(t->dtype, is_int64)) return MOEGRAD_STATUS_SUCCESS;
  return fail(MOEGRAD_STATUS_BAD_DTYPE, "%s: dtype %s must be int32 or int64", name, dtype_text(t->dtype).text);
}

ByteSpan byte_span(const Layout& l, int rank, int64_t elem_bytes) {
  ByteSpan span;
  intptr_t lo = 0, hi = 0;
  for (int d = 0; d < rank; ++d) {
    if (l.shape[d] == 0) return span;
    const intptr_t step = static_cast<intptr_t>(l.stride[d]) * (l.shape[d] - 1) * elem_bytes;  // bounded by check_tensor
    (step < 0 ? lo : hi) += step;
  }
  const auto base = reinterpret_cast<uintptr_t>(l.data);
  span.first = base + static_cast<uintptr_t>(lo);
  span.last = base + static_cast<uintptr_t>(hi) + static_cast<uintptr_t>(elem_bytes) - 1;
  span.empty = false;
  return span;
}

int overlapping_dim(const Layout& l, int rank) {
  int order[3] = {0, 0, 0};
  int n = 0;
  for (int d = 0; d < rank; ++d)
    if (l.shape[d] > 1) order[n++] = d;
  for (int i = 1; i < n; ++i)  // insertion sort of at most 3
    for (int j = i; j > 0 && l.stride[order[j]] < l.stride[order[j - 1]]; --j) std::swap(order[j], order[j - 1]);
  int64_t extent = 0;  // the largest element offset spanned so far
  for (int i = 0; i < n; ++i) {
    const int d = order[i];
    if (l.stride[d] <= extent) return d;
    extent += l.stride[d] * (l.shape[d] - 1);  // cannot overflow: check_tensor bounded it
  }
  return -1;
}

moegrad_status check_disjoint(const char* out_name, const ByteSpan& out, const char* other_name,
                              const ByteSpan& other) {
  if (out.empty || other.empty || out.last < other.first || other.last < out.first) return MOEGRAD_STATUS_SUCCESS;
  return fail(MOEGRAD_STATUS_ALIASING, "%s (bytes %#" PRIxPTR "..%#" PRIxPTR ") overlaps the address range of %s (bytes %#" PRIxPTR
              "..%#" PRIxPTR "); an output must lie wholly outside it", out_name, out.first, out.last, other_name, other.first, other.last);
}

moegrad_status check_workspace_apart(const char* function, const void* workspace, size_t bytes,
                                     const TensorSpans& tensors) {
  if (workspace == nullptr || bytes == 0) return MOEGRAD_STATUS_SUCCESS;
  const auto first = reinterpret_cast<uintptr_t>(workspace);
  const uintptr_t last = first + (bytes - 1);  // the caller's buffer holds `bytes`, so no wrap
  for (int t = 0; t < tensors.count; ++t) {
    const ByteSpan& other = tensors.span[t];
    if (other.empty || last < other.first || other.last < first) continue;
    return fail(MOEGRAD_STATUS_ALIASING, "moegrad_%s: the workspace (bytes %#" PRIxPTR "..%#" PRIxPTR ") overlaps %s "
                "(bytes %#" PRIxPTR "..%#" PRIxPTR "); it must share no byte with any tensor of the call",
                function, first, last, tensors.name[t], other.first, other.last);
  }
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad
