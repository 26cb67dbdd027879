// Write-then-rename: the output appears complete under its name or not at all.
// The temp file lives in the destination directory (rename is only atomic
// within one file system) and is removed by the destructor unless commit()
// succeeded, so no error path - an exception included - leaves a file behind.
#pragma once

#include <cstddef>
#include <string>

namespace moegrad::cli {

class AtomicFile {
 public:
  // Creates the temp file now, so an unwritable destination fails before any
  // long computation. Throws CliError (exit 1).
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, std::size_t bytes);
  // fsync, close, rename into place, fsync the directory.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what, int err);

  std::string path_;
  std::string dir_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace moegrad::cli
