// A strided DLPack tensor for hardening checks. Unlike an ordinary test
// buffer, its storage is *exactly* the bytes its elements span (plus an
// optional pad in front), so under AddressSanitizer any access outside the
// addressed elements lands in a redzone. Strides may be negative or zero, and
// the storage may be borrowed (e.g. a sparse mmap region past 4 GiB).
//
// No GoogleTest here: the kit is linked into the libFuzzer targets too.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mgh {

inline constexpr DLDataType kF32{kDLFloat, 32, 1};
inline constexpr DLDataType kF16{kDLFloat, 16, 1};
inline constexpr DLDataType kBF16{kDLBfloat, 16, 1};
inline constexpr DLDataType kI32{kDLInt, 32, 1};
inline constexpr DLDataType kI64{kDLInt, 64, 1};

bool same_dtype(DLDataType a, DLDataType b);
std::string dtype_string(DLDataType t);  // "float32", "bfloat16", "int64", "code=.. bits=.."

// Exact decoding of 16-bit floats (written from the IEEE definitions, not
// taken from the library).
double f16_bits_to_double(uint16_t h);
double bf16_bits_to_double(uint16_t h);
// Encodes v, which must be exactly representable (small integers are);
// aborts otherwise.
uint16_t f16_bits_exact(double v);
uint16_t bf16_bits_exact(double v);

// Bytes the elements of a tensor span: min/max element offset over all
// logical indices (0/0 for an empty tensor).
struct Extent {
  int64_t min_offset = 0;
  int64_t max_offset = 0;
  bool empty = false;
};
Extent extent_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);
std::vector<int64_t> compact_strides(const std::vector<int64_t>& shape);

class Tensor {
 public:
  Tensor() = default;
  // Owned storage: `pad_bytes` in front (reached through byte_offset), then
  // the elements' span. strides empty = compact row-major; null_strides =
  // describe it with DLTensor::strides == NULL (only valid when compact).
  Tensor(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
         bool null_strides = true, uint64_t pad_bytes = 0);
  // Borrowed storage: element 0 at `origin` (which must leave room for the
  // negative-stride part of the extent inside the caller's region).
  static Tensor borrowed(void* origin, DLDataType dtype, std::vector<int64_t> shape,
                         std::vector<int64_t> strides);

  Tensor(Tensor&&) = default;
  Tensor& operator=(Tensor&&) = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // The DLPack view; it points into this object (stable across moves).
  const DLTensor& dl() const { return dl_; }
  DLTensor& dl() { return dl_; }

  DLDataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t numel() const;
  int elem_bytes() const { return (dtype_.bits + 7) / 8; }

  // Element offset of a logical index (row-major linear index for the
  // convenience overload).
  int64_t offset(const std::vector<int64_t>& index) const;
  int64_t offset_of_linear(int64_t linear) const;

  // Raw element bits / exact values at an element offset.
  uint64_t get_bits(int64_t off) const;
  void set_bits(int64_t off, uint64_t bits);
  double get(int64_t off) const;          // floats widened exactly, ints as value
  void set(int64_t off, double value);    // must be exact in the dtype
  int64_t get_int(int64_t off) const;
  void set_int(int64_t off, int64_t value);

  // The owned storage (empty span for borrowed tensors).
  std::byte* storage() { return storage_.get(); }
  const std::byte* storage() const { return storage_.get(); }
  size_t storage_bytes() const { return storage_bytes_; }
  std::vector<std::byte> snapshot() const;  // copy of the owned storage
  void fill_bytes(uint8_t byte);
  void fill_words(uint32_t word);            // 32-bit pattern, e.g. a NaN
  void fill_from(const std::vector<uint8_t>& pattern);  // repeated

 private:
  std::byte* element_ptr(int64_t off) const;

  DLDataType dtype_{};
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  std::unique_ptr<std::byte[]> storage_;
  size_t storage_bytes_ = 0;
  std::byte* origin_ = nullptr;  // element 0
  DLTensor dl_{};
};

// splitmix64: every random choice in the kit is reproducible from a seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next();
  int64_t uniform(int64_t lo, int64_t hi);  // inclusive
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<size_t>(uniform(0, static_cast<int64_t>(i) - 1))]);
  }

 private:
  uint64_t s_;
};

}  // namespace mgh
