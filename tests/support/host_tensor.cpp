#include "host_tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "float_formats.h"

namespace mgt {

void* allocate_test_memory(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t align = bytes >= 2 * kHugePage ? kHugePage : 64;
  const size_t rounded = bytes == 0 ? align : (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (align == kHugePage) (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint; failure is harmless
  return p;
}

void free_test_memory(void* p) noexcept { std::free(p); }

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

const char* index_dtype_name(IndexDType t) { return t == IndexDType::kI32 ? "int32" : "int64"; }

DLDataType dl_type(uint8_t code, uint8_t bits) { return DLDataType{code, bits, 1}; }

DLDataType dl_type(DType t) {
  switch (t) {
    case DType::kF32: return dl_type(kDLFloat, 32);
    case DType::kF16: return dl_type(kDLFloat, 16);
    case DType::kBF16: return dl_type(kDLBfloat, 16);
  }
  throw std::invalid_argument("dl_type: bad DType");
}

DLDataType dl_type(IndexDType t) { return dl_type(kDLInt, t == IndexDType::kI32 ? 32 : 64); }

uint32_t sentinel_word(DLDataType t) {
  if (t.bits == 16 && t.code == kDLFloat) return kSentinelBitsF16;
  if (t.bits == 16 && t.code == kDLBfloat) return kSentinelBitsBF16;
  return kSentinelBits;
}

HostTensor::HostTensor(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                       uint64_t byte_offset, bool explicit_strides)
    : dtype_(dtype), shape_(std::move(shape)), null_strides_(strides.empty() && !explicit_strides),
      byte_offset_(byte_offset) {
  if (dtype_.bits % 8 != 0 || dtype_.bits == 0) throw std::invalid_argument("HostTensor: bits");
  if (strides.empty()) {
    strides.assign(shape_.size(), 1);
    for (size_t d = shape_.size(); d-- > 1;) strides[d - 1] = strides[d] * shape_[d];
  }
  if (strides.size() != shape_.size()) throw std::invalid_argument("HostTensor: strides rank");
  strides_ = std::move(strides);
  int64_t span = numel() == 0 ? 0 : 1;  // elements from the first to one past the last
  for (size_t d = 0; d < shape_.size() && span != 0; ++d) {
    if (strides_[d] < 0) throw std::invalid_argument("HostTensor: negative stride");
    span += (shape_[d] - 1) * strides_[d];
  }
  size_t bytes = byte_offset_ + static_cast<size_t>(span) * static_cast<size_t>(element_bytes());
  bytes = (bytes + 63) / 64 * 64;
  if (bytes < 64) bytes = 64;  // never a null data pointer, even for empty tensors
  storage_.resize(bytes);
  fill_sentinel();
}

DLTensor HostTensor::view() const {
  DLTensor t{};
  t.data = const_cast<std::byte*>(storage_.data());
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape_.size());
  t.dtype = dtype_;
  t.shape = const_cast<int64_t*>(shape_.data());
  t.strides = null_strides_ ? nullptr : const_cast<int64_t*>(strides_.data());
  t.byte_offset = byte_offset_;
  return t;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

int64_t HostTensor::offset(std::initializer_list<int64_t> index) const {
  if (index.size() != shape_.size()) throw std::invalid_argument("HostTensor::offset: rank");
  int64_t off = 0;
  size_t d = 0;
  for (int64_t i : index) {
    if (i < 0 || i >= shape_[d]) throw std::out_of_range("HostTensor::offset: index");
    off += i * strides_[d++];
  }
  return off;
}

int64_t HostTensor::offset_of_linear(int64_t linear) const {
  int64_t off = 0;
  for (size_t d = shape_.size(); d-- > 0;) {
    off += (linear % shape_[d]) * strides_[d];
    linear /= shape_[d];
  }
  return off;
}

float HostTensor::get_float(int64_t elem_offset) const {
  const auto bits = get_bits(elem_offset);
  if (dtype_.code == kDLFloat && dtype_.bits == 32) return bits_float(static_cast<uint32_t>(bits));
  if (dtype_.code == kDLFloat && dtype_.bits == 16) return f16_bits_to_float(static_cast<uint16_t>(bits));
  if (dtype_.code == kDLBfloat && dtype_.bits == 16) return bf16_bits_to_float(static_cast<uint16_t>(bits));
  throw std::logic_error("HostTensor::get_float: not a float tensor");
}

void HostTensor::set_float(int64_t elem_offset, float value) {
  uint64_t bits;
  if (dtype_.code == kDLFloat && dtype_.bits == 32) bits = float_bits(value);
  else if (dtype_.code == kDLFloat && dtype_.bits == 16) bits = float_to_f16_bits(value);
  else if (dtype_.code == kDLBfloat && dtype_.bits == 16) bits = float_to_bf16_bits(value);
  else throw std::logic_error("HostTensor::set_float: not a float tensor");
  set_bits(elem_offset, bits);
  if (float_bits(get_float(elem_offset)) != float_bits(value))
    throw std::invalid_argument("HostTensor::set_float: value not exact in this dtype");
}

int64_t HostTensor::get_index(int64_t elem_offset) const {
  const auto bits = get_bits(elem_offset);
  if (dtype_.bits == 32) return static_cast<int32_t>(static_cast<uint32_t>(bits));
  return static_cast<int64_t>(bits);
}

void HostTensor::set_index(int64_t elem_offset, int64_t value) {
  if (dtype_.code != kDLInt) throw std::logic_error("HostTensor::set_index: not an int tensor");
  if (dtype_.bits == 32 && static_cast<int32_t>(value) != value)
    throw std::invalid_argument("HostTensor::set_index: value does not fit int32");
  set_bits(elem_offset, static_cast<uint64_t>(value));
}

void HostTensor::fill_sentinel() {
  const uint32_t word = sentinel_word(dtype_);
  for (size_t i = 0; i + 4 <= storage_.size(); i += 4) std::memcpy(storage_.data() + i, &word, 4);
}

bool HostTensor::all_sentinel() const {
  const uint32_t word = sentinel_word(dtype_);
  for (size_t i = 0; i + 4 <= storage_.size(); i += 4)
    if (std::memcmp(storage_.data() + i, &word, 4) != 0) return false;
  return true;
}

bool HostTensor::sentinel_outside_view() const {
  std::vector<bool> in_view(storage_.size(), false);
  const auto eb = static_cast<size_t>(element_bytes());
  for (int64_t e = 0; e < numel(); ++e) {
    const size_t start = byte_offset_ + static_cast<size_t>(offset_of_linear(e)) * eb;
    for (size_t b = 0; b < eb; ++b) in_view[start + b] = true;
  }
  const uint32_t word = sentinel_word(dtype_);
  const auto* sentinel = reinterpret_cast<const std::byte*>(&word);
  for (size_t i = 0; i < storage_.size(); ++i)
    if (!in_view[i] && storage_.data()[i] != sentinel[i % 4]) return false;
  return true;
}

Floats read_matrix_f32(const HostTensor& t) {
  if (t.shape().size() != 2 || t.dtype().code != kDLFloat || t.dtype().bits != 32)
    throw std::invalid_argument("read_matrix_f32: not a 2-D f32 tensor");
  Floats out(static_cast<size_t>(t.numel()));
  for (int64_t e = 0; e < t.numel(); ++e) out[static_cast<size_t>(e)] = t.get_float(t.offset_of_linear(e));
  return out;
}

}  // namespace mgt
