// A JSON string literal: quotes, backslashes and control characters escaped,
// and any byte that is not part of valid UTF-8 written as U+FFFD, so any
// text (an environment variable's name or value, a loader's message, a CPU
// name) keeps the output parseable: JSON text is UTF-8 (RFC 8259), and a
// reader such as Python's json.loads of subprocess text refuses anything
// else. Shared by `moegrad info` and `moegrad bench --json`.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string_view>

namespace moegrad::cli {

// The length of the UTF-8 sequence that starts at s[i], or 0 if none does
// (RFC 3629: the lead byte's range fixes the length, and for E0, ED, F0 and
// F4 the second byte's range excludes overlong forms, surrogates and code
// points past U+10FFFF).
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t j) { return static_cast<unsigned char>(s[j]); };
  const unsigned char lead = at(i);
  if (lead < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    if (lead == 0xe0) lo = 0xa0;
    if (lead == 0xed) hi = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    if (lead == 0xf0) lo = 0x90;
    if (lead == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (s.size() - i < n || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t j = 2; j < n; ++j)
    if (at(i + j) < 0x80 || at(i + j) > 0xbf) return 0;
  return n;
}

inline void write_json_string(std::FILE* out, std::string_view s) {
  std::fputc('"', out);
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      std::fputc('\\', out);
      std::fputc(c, out);
      ++i;
    } else if (c < 0x20) {
      std::fprintf(out, "\\u%04x", static_cast<unsigned>(c));
      ++i;
    } else if (const std::size_t n = utf8_sequence_length(s, i); n > 0) {
      std::fwrite(s.data() + i, 1, n, out);
      i += n;
    } else {
      std::fputs("\\ufffd", out);
      ++i;
    }
  }
  std::fputc('"', out);
}

}  // namespace moegrad::cli
