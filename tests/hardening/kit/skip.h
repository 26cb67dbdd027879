// MGH_FUZZ_SKIP="name,name": switches off the named fault kinds / checks of
// the fuzz cases, so fuzzing can go on past a reported bug that is still
// open. scripts/test_fuzz.sh unsets it, and the corpus replay
// (FuzzCorpus.NoCheckIsSwitchedOff) fails while it is set.
#pragma once

#include <cstdlib>
#include <string>

namespace mgh {

inline bool fuzz_skip(const std::string& name) {
  static const std::string list = [] {
    const char* e = std::getenv("MGH_FUZZ_SKIP");
    // Built with += : GCC 12 misreports "," + std::string(...) (-Wrestrict, PR 105329).
    std::string padded;
    if (e != nullptr) {
      padded = ",";
      padded += e;
      padded += ",";
    }
    return padded;
  }();
  std::string key = ",";
  key += name;
  key += ",";
  return !list.empty() && list.find(key) != std::string::npos;
}

}  // namespace mgh
