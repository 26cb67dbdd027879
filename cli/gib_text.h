// Byte counts as `moegrad run` and `grad-x` quote memory in their messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace moegrad::cli {

// "27.47 GiB": two decimals, or `decimals`.
inline std::string gib_text(uint64_t bytes, int decimals = 2) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f GiB", decimals, static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

// A need and what is available, as gib_text quotes them, with more decimals
// where two decimals would read alike ("needs 0.25 GiB, more than the 0.25
// GiB available" reads as no shortage), and in bytes where nine would.
inline std::pair<std::string, std::string> gib_texts(uint64_t need, uint64_t available) {
  for (int decimals = 2; decimals <= 9; ++decimals) {
    std::pair<std::string, std::string> texts{gib_text(need, decimals), gib_text(available, decimals)};
    if (need == available || texts.first != texts.second) return texts;
  }
  return {std::to_string(need) + " bytes", std::to_string(available) + " bytes"};
}

}  // namespace moegrad::cli
