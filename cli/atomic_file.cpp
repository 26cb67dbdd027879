#include "atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "cli_error.h"

namespace moegrad::cli {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const std::size_t slash = path_.rfind('/');
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  dir_ = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
  if (base.empty() || base == "." || base == "..") data_error(path_ + ": not a file name");

  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    data_error(path_ + ": is a directory");
  }
  // A hidden name that says who made it, unique per process and attempt;
  // O_EXCL makes a clash with any existing file a retry, never an overwrite.
  // Mode 0666 lets the umask decide, as for any file the user creates.
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_path_ = dir_ + "/." + base + ".moegrad-tmp-" + std::to_string(::getpid()) + "-" +
                 std::to_string(attempt);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) {
      const int err = errno;
      temp_path_.clear();
      data_error(path_ + ": cannot create a file in " + dir_ + ": " + std::strerror(err));
    }
  }
  temp_path_.clear();
  data_error(path_ + ": cannot create a temporary file in " + dir_);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFile::fail(const std::string& what, int err) {
  data_error(path_ + ": " + what + ": " + std::strerror(err));
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed", errno);
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  // fsync before rename: otherwise a crash can leave the new name pointing at
  // an empty or partial file.
  if (::fsync(fd_) != 0) fail("fsync failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close failed", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("rename failed", errno);
  committed_ = true;
  // Makes the rename itself durable; failure here cannot undo the rename and
  // the data is already in place, so it is not an error.
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace moegrad::cli
