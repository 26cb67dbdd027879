#include "scratch_dir.h"

#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <system_error>

namespace moegrad::test {

ScratchDir::ScratchDir() {
  std::error_code ec;
  std::string tmpl = (std::filesystem::temp_directory_path(ec) / "moegrad_test_XXXXXX").string();
  if (!ec && mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::read(const std::string& name) const {
  std::ifstream in(path_ / name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> ScratchDir::listing() const {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(path_)) names.insert(entry.path().filename().string());
  return names;
}

}  // namespace moegrad::test
