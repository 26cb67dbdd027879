// Placeholder so `moegrad bench` is listed and fails clearly until the
// benchmark lands; its author replaces this file.
#include <cstdio>
#include <string_view>

#include "cli_error.h"
#include "commands.h"

namespace moegrad::cli {

int cmd_bench(std::span<char* const> args) {
  for (char* const a : args) {
    if (std::string_view(a) == "--help" || std::string_view(a) == "-h") {
      std::puts("Usage: moegrad bench [--json]\n\nThe benchmark table (SPEC 8). Not built yet.");
      return kExitOk;
    }
  }
  usage_error("bench is not built yet");
}

}  // namespace moegrad::cli
