// The libFuzzer entry point of a target whose checks live in the hardening
// kit: a check returns "" or what went wrong, and anything wrong is a crash
// (with the reason on stderr) that libFuzzer saves as an artifact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#define MGH_FUZZ_TARGET(name, check)                                     \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    const std::string failure = check(data, size);                       \
    if (!failure.empty()) {                                              \
      std::fprintf(stderr, name ": %s\n", failure.c_str());              \
      std::abort();                                                      \
    }                                                                    \
    return 0;                                                            \
  }
