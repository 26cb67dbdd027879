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

AlignedBuffer AlignedBuffer::reserve(std::size_t bytes, const char* what) {
  AlignedBuffer b;
  // No access: Linux charges a private mapping to the commit account only
  // once it is writable, so the overcommit check happens in back(). Not
  // MAP_NORESERVE, which would exempt it from that check for good: a
  // grad_x larger than the machine would then be killed by the OOM killer
  // while being written instead of refused. Zero bytes still get memory,
  // for a non-null address.
  const std::size_t length = bytes == 0 ? kAlignment : bytes;
  void* p = ::mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) out_of_memory(bytes, what);
  b.data_ = static_cast<std::byte*>(p);
  b.size_ = bytes;
  b.mapped_ = length;
  b.reserved_ = true;
  return b;
}

void AlignedBuffer::back(const char* what) {
  if (!reserved_) return;
  if (::mprotect(data_, mapped_, PROT_READ | PROT_WRITE) != 0) out_of_memory(size_, what);
  if (size_ >= kHugePageThreshold) (void)::madvise(data_, mapped_, MADV_HUGEPAGE);
  reserved_ = false;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)),
      reserved_(std::exchange(other.reserved_, false)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(mapped_, other.mapped_);
  std::swap(reserved_, other.reserved_);
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
