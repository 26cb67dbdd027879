// A JSON string literal: quotes, backslashes and control characters escaped,
// so any text (an environment variable, a loader's message) keeps the output
// parseable. Shared by `moegrad info` and `moegrad bench --json`.
#pragma once

#include <cstdio>
#include <string_view>

namespace moegrad::cli {

inline void write_json_string(std::FILE* out, std::string_view s) {
  std::fputc('"', out);
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      std::fputc('\\', out);
      std::fputc(c, out);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      std::fprintf(out, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      std::fputc(c, out);
    }
  }
  std::fputc('"', out);
}

}  // namespace moegrad::cli
