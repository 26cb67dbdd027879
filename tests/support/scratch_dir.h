// A fresh directory under the system's temp directory, removed with all it
// holds when the object goes: where end-to-end tests let a command write
// files and then look at what it left.
#pragma once

#include <filesystem>
#include <set>
#include <string>

namespace moegrad::test {

class ScratchDir {
 public:
  ScratchDir();  // path() is empty if no directory could be made
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The bytes of the file `name` in it (empty if there is none).
  std::string read(const std::string& name) const;
  // The names of its entries, temp files included.
  std::set<std::string> listing() const;

 private:
  std::filesystem::path path_;
};

}  // namespace moegrad::test
