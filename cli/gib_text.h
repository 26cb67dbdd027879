// A byte count as `moegrad run` quotes memory in its messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace moegrad::cli {

// "27.47 GiB": two decimals, as memory-sized figures need no more.
inline std::string gib_text(uint64_t bytes) {
  char text[48];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace moegrad::cli
