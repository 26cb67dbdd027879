// MGH_FUZZ_SKIP="name,name": switches off the named fault kinds / checks of
// the fuzz cases, so fuzzing can go on past a reported bug that is still
// open. The test scripts never set it.
#pragma once

#include <cstdlib>
#include <string>

namespace mgh {

inline bool fuzz_skip(const std::string& name) {
  static const std::string list = [] {
    const char* e = std::getenv("MGH_FUZZ_SKIP");
    return e ? "," + std::string(e) + "," : std::string();
  }();
  return !list.empty() && list.find("," + name + ",") != std::string::npos;
}

}  // namespace mgh
