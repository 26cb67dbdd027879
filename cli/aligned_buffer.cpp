#include "aligned_buffer.h"

#include <sys/mman.h>

#include <new>
#include <string>
#include <utility>

#include "cli_error.h"

namespace moegrad::cli {
namespace {

// Large buffers are mapped directly and marked for transparent huge pages:
// first-touching a 3.5 GB weight in 4 KiB pages costs ~10 s of page faults on
// some VMs (and TLB misses in the kernels later); in 2 MiB pages, well under 1 s.
constexpr std::size_t kHugePageThreshold = std::size_t{16} << 20;

[[noreturn]] void out_of_memory(std::size_t bytes, const char* what) {
  data_error("out of memory: cannot allocate " + std::to_string(bytes) + " bytes for " + what);
}

}  // namespace

AlignedBuffer::AlignedBuffer(std::size_t bytes, const char* what) : size_(bytes) {
  if (bytes >= kHugePageThreshold) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) out_of_memory(bytes, what);
    (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: fine if THP is off
    data_ = static_cast<std::byte*>(p);
    mapped_ = bytes;
    return;
  }
  void* p =
      ::operator new (bytes == 0 ? kAlignment : bytes, std::align_val_t{kAlignment}, std::nothrow);
  if (p == nullptr) out_of_memory(bytes, what);
  data_ = static_cast<std::byte*>(p);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(mapped_, other.mapped_);
  return *this;
}

AlignedBuffer::~AlignedBuffer() {
  if (data_ == nullptr) return;
  if (mapped_ > 0) {
    ::munmap(data_, mapped_);
  } else {
    ::operator delete (data_, std::align_val_t{kAlignment});
  }
}

}  // namespace moegrad::cli
