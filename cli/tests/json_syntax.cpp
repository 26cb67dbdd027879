#include "json_syntax.h"

#include <cctype>
#include <cstddef>

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
  bool string() {
    if (!eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (static_cast<unsigned char>(s_[i_]) < 0x20) return false;
      if (s_[i_] == '\\') ++i_;
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
