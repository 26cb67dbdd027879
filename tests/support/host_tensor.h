// A host buffer with a DLPack description: any non-negative element strides,
// an optional byte_offset, and a sentinel fill so unwritten (or wrongly
// written) bytes are visible.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace mgt {

// Memory for large test data: 64-byte aligned, and buffers of 4 MiB or more
// on transparent huge pages. The large-token case touches ~0.5 GB, and on a
// virtual machine 4 KiB page faults would dominate its run time.
void* allocate_test_memory(size_t bytes);
void free_test_memory(void* p) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_test_memory(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { free_test_memory(p); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

using Bytes = std::vector<std::byte, HugePageAllocator<std::byte>>;
using Floats = std::vector<float, HugePageAllocator<float>>;

enum class DType { kF32, kF16, kBF16 };
enum class IndexDType { kI32, kI64 };

const char* dtype_name(DType t);
const char* index_dtype_name(IndexDType t);
DLDataType dl_type(DType t);
DLDataType dl_type(IndexDType t);
DLDataType dl_type(uint8_t code, uint8_t bits);
inline constexpr DLDataType kDLF32{kDLFloat, 32, 1};

// The whole storage is filled with a NaN of the element's width that no
// operation produces (never the canonical NaN), repeated in 32-bit words:
// for 4- and 8-byte elements a quiet f32 NaN with a payload, for f16 and
// bf16 two of their own signalling NaNs (0x7D01, 0x7F81), so that every
// unwritten element of any float output reads as NaN.
inline constexpr uint32_t kSentinelBits = 0x7FF0DEADu;
inline constexpr uint32_t kSentinelBitsF16 = 0x7D017D01u;
inline constexpr uint32_t kSentinelBitsBF16 = 0x7F817F81u;
uint32_t sentinel_word(DLDataType t);

class HostTensor {
 public:
  HostTensor() = default;
  // strides in elements; empty means compact row-major, described with NULL
  // strides unless explicit_strides is set.
  HostTensor(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
             uint64_t byte_offset = 0, bool explicit_strides = false);

  // The DLPack description; its pointers point into this object.
  DLTensor view() const;

  DLDataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t numel() const;
  int element_bytes() const { return dtype_.bits / 8; }

  // Element offset of a logical index.
  int64_t offset(std::initializer_list<int64_t> index) const;
  // Element offset of the row-major logical linear index `linear`.
  int64_t offset_of_linear(int64_t linear) const;

  uint64_t get_bits(int64_t elem_offset) const {
    uint64_t bits = 0;  // little-endian host
    std::memcpy(&bits, element(elem_offset), static_cast<size_t>(element_bytes()));
    return bits;
  }
  void set_bits(int64_t elem_offset, uint64_t bits) {
    std::memcpy(const_cast<std::byte*>(element(elem_offset)), &bits, static_cast<size_t>(element_bytes()));
  }
  // Float tensors: exact widening of the stored element / storing a value
  // that must be exactly representable in the dtype.
  float get_float(int64_t elem_offset) const;
  void set_float(int64_t elem_offset, float value);
  // Integer tensors.
  int64_t get_index(int64_t elem_offset) const;
  void set_index(int64_t elem_offset, int64_t value);

  void fill_sentinel();
  // True if every storage byte still holds the sentinel pattern.
  bool all_sentinel() const;
  // True if every storage byte outside the viewed elements holds the sentinel.
  bool sentinel_outside_view() const;

  const Bytes& storage() const { return storage_; }

 private:
  const std::byte* element(int64_t elem_offset) const {
    return storage_.data() + byte_offset_ + static_cast<size_t>(elem_offset) * static_cast<size_t>(element_bytes());
  }

  DLDataType dtype_{};
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;  // always filled (compact when not given)
  bool null_strides_ = true;
  uint64_t byte_offset_ = 0;
  Bytes storage_;
};

// Row-major logical copy of a float32 [rows, cols] tensor.
Floats read_matrix_f32(const HostTensor& t);

}  // namespace mgt
