#include "mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "cli_error.h"

namespace moegrad::cli {

MappedFile MappedFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before the
  // check below could refuse it (it does not affect reading a mapping).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) data_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    data_error(path + ": cannot stat: " + std::strerror(err));
  }
  // A directory, pipe or device has no fixed size to map and check against the
  // header, so refuse it up front with a plain reason.
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    data_error(path + ": not a regular file");
  }
  MappedFile file;
  file.size_ = static_cast<std::size_t>(st.st_size);
  if (file.size_ > 0) {
    void* addr = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      data_error(path + ": cannot map: " + std::strerror(err));
    }
    file.addr_ = addr;
  }
  ::close(fd);  // the mapping keeps the file alive
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : addr_(std::exchange(other.addr_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  std::swap(addr_, other.addr_);
  std::swap(size_, other.size_);
  return *this;
}

MappedFile::~MappedFile() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

}  // namespace moegrad::cli
