// A whole input file mapped read-only. A 3.5 GB weight then costs no copy and
// no time until the kernels touch it, and the page cache is shared.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace moegrad::cli {

class MappedFile {
 public:
  // Throws CliError (exit 1) with the path and the system's reason.
  static MappedFile open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(addr_), size_};
  }

 private:
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace moegrad::cli
