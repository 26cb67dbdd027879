// Heap memory aligned for SIMD loads. An allocation failure becomes a CliError
// naming what was being allocated, instead of std::bad_alloc from deep inside.
#pragma once

#include <cstddef>

namespace moegrad::cli {

class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 64;

  AlignedBuffer() = default;
  // `what` names the buffer in the out-of-memory message. Zero bytes still
  // yields a non-null pointer: the library rejects null data even when empty.
  // Contents are uninitialised.
  AlignedBuffer(std::size_t bytes, const char* what);
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  // Address space for `bytes`, not yet backed by memory; back() makes it
  // usable. For an output whose address the library's validation must see
  // before its size is known to make sense: a wrong shape is then reported
  // as what it is, not as a buffer too large for memory. Only a cap on the
  // address space (RLIMIT_AS, `ulimit -v`) or a size beyond the process's
  // address space (128 TiB on x86-64) refuses the reservation itself.
  static AlignedBuffer reserve(std::size_t bytes, const char* what);
  // Backs a reserved buffer with memory (no-op for any other). Throws the
  // same out-of-memory CliError as the constructor.
  void back(const char* what);

  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  template <class T>
  T* as() const noexcept {
    return reinterpret_cast<T*>(data_);
  }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_ = 0;  // > 0: data_ is an mmap of this many bytes
  bool reserved_ = false;   // mapped without access: back() not yet called
};

}  // namespace moegrad::cli
