#include "json_syntax.h"

#include <cctype>
#include <cstddef>
#include <cstdint>

namespace moegrad::cli_test {
namespace {

class JsonChecker {
 public:
  explicit JsonChecker(std::string_view s) : s_(s) {}

  bool document() {
    space();
    if (peek() != '{' || !value()) return false;
    space();
    return i_ == s_.size();
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  bool digits() {
    const std::size_t start = i_;
    while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
    return i_ > start;
  }
  bool number() {
    eat('-');
    if (!eat('0') && !digits()) return false;
    if (eat('.') && !digits()) return false;
    if (eat('e') || eat('E')) {
      if (!eat('+')) eat('-');
      if (!digits()) return false;
    }
    return true;
  }
  // JSON text is UTF-8 (RFC 8259): a multi-byte character must decode to a
  // code point that needs all its bytes, is no surrogate and is at most
  // U+10FFFF.
  bool utf8_character() {
    const auto byte = [&](std::size_t j) { return static_cast<unsigned char>(s_[j]); };
    const unsigned char lead = byte(i_);
    const int n = lead >= 0xf8 ? 0 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
    if (n == 0 || s_.size() - i_ < static_cast<std::size_t>(n)) return false;
    uint32_t code = lead & (0x7fu >> n);
    for (int j = 1; j < n; ++j) {
      if ((byte(i_ + j) & 0xc0) != 0x80) return false;
      code = code << 6 | (byte(i_ + j) & 0x3fu);
    }
    static constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kLeast[n] || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return false;
    i_ += static_cast<std::size_t>(n);
    return true;
  }
  bool string() {
    if (!eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c < 0x20) return false;
      if (c >= 0x80) {
        if (!utf8_character()) return false;
        continue;
      }
      if (c == '\\') ++i_;
      ++i_;
    }
    return eat('"');
  }
  bool value() {
    space();
    bool ok = false;
    switch (peek()) {
      case '{':
        ok = members('{', '}', true);
        break;
      case '[':
        ok = members('[', ']', false);
        break;
      case '"':
        ok = string();
        break;
      case 't':
        ok = literal("true");
        break;
      case 'f':
        ok = literal("false");
        break;
      case 'n':
        ok = literal("null");
        break;
      default:
        ok = number();
        break;
    }
    space();
    return ok;
  }
  bool members(char open, char close, bool keyed) {
    eat(open);
    space();
    if (eat(close)) return true;
    do {
      space();
      if (keyed) {
        if (!string()) return false;
        space();
        if (!eat(':')) return false;
      }
      if (!value()) return false;
    } while (eat(','));
    return eat(close);
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

bool is_single_json_object(std::string_view text) { return JsonChecker(text).document(); }

}  // namespace moegrad::cli_test
