#include "npy_header.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

namespace moegrad::cli {
namespace {

// Recursive descent over the subset of Python literals a .npy header uses:
// a dict of str keys to str, bool and tuple-of-int values.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    skip_space();
    expect('{', "the dictionary to start with '{'");
    skip_space();
    while (!consume('}')) {
      const std::size_t key_pos = pos_;
      const std::string key = string_literal();
      skip_space();
      expect(':', "':' after a key");
      skip_space();
      if (key == "descr") {
        mark_seen(seen_descr, key, key_pos);
        if (peek() == '[') fail("structured (record) dtypes are not supported");
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        mark_seen(seen_fortran, key, key_pos);
        h.fortran_order = boolean();
      } else if (key == "shape") {
        mark_seen(seen_shape, key, key_pos);
        h.shape = int_tuple();
      } else {
        pos_ = key_pos;
        fail("unexpected key '" + key + "' (a .npy header has only descr, fortran_order, shape)");
      }
      skip_space();
      if (consume(',')) {
        skip_space();
      } else if (peek() != '}') {
        fail("expected ',' or '}'");
      }
    }
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the dictionary");
    if (!seen_descr) throw NpyError("bad header: no 'descr' key");
    if (!seen_fortran) throw NpyError("bad header: no 'fortran_order' key");
    if (!seen_shape) throw NpyError("bad header: no 'shape' key");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw NpyError("bad header at byte " + std::to_string(pos_) + ": " + what);
  }

  void mark_seen(bool& seen, const std::string& key, std::size_t key_pos) {
    if (seen) {
      pos_ = key_pos;
      fail("key '" + key + "' appears twice");
    }
    seen = true;
  }

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

  bool consume(char c) {
    if (peek() != c || pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }

  void expect(char c, const char* what) {
    if (!consume(c)) fail(std::string("expected ") + what);
  }

  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  // 'text' or "text". The values we accept never need escapes, so a backslash
  // is refused rather than half-interpreted.
  std::string string_literal() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    ++pos_;
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\') fail("escapes in strings are not supported");
      ++pos_;
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    std::string out(s_.substr(start, pos_ - start));
    ++pos_;
    return out;
  }

  bool boolean() {
    if (s_.substr(pos_).starts_with("True")) {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_).starts_with("False")) {
      pos_ += 5;
      return false;
    }
    fail("fortran_order must be True or False");
  }

  // Python ints are unbounded; a dimension beyond int64 is refused here, and
  // the loader checks the product separately.
  int64_t integer() {
    const std::size_t start = pos_;
    int64_t value = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const int digit = s_[pos_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        pos_ = start;
        fail("dimension too large (over 2^63-1)");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail("expected a non-negative integer dimension");
    // Python 3 has no such literal (010 was octal in Python 2), so NumPy
    // refuses the file; reading it as decimal would guess. 00 is still 0.
    if (s_[start] == '0' && value != 0) {
      pos_ = start;
      fail("a dimension with a leading zero is not a Python integer");
    }
    consume('L');  // Python 2 long literals, as old NumPy wrote them
    return value;
  }

  // (), (n,), (a, b), (a, b,)
  std::vector<int64_t> int_tuple() {
    expect('(', "shape to be a tuple '('");
    std::vector<int64_t> dims;
    skip_space();
    while (!consume(')')) {
      if (dims.size() == kNpyMaxDims) fail("more than 64 dimensions");
      dims.push_back(integer());
      skip_space();
      if (consume(',')) {
        skip_space();
      } else if (peek() != ')') {
        fail("expected ',' or ')' in shape");
      } else if (dims.size() == 1) {
        // "(5)" is the int 5 in Python, not a tuple; NumPy always writes "(5,)".
        fail("a one-dimensional shape needs a trailing comma: (n,)");
      }
    }
    return dims;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(std::string_view text) { return HeaderParser(text).parse(); }

std::string format_npy_header(std::string_view descr, bool fortran_order,
                              std::span<const int64_t> shape) {
  std::string dict = "{'descr': '" + std::string(descr) +
                     "', 'fortran_order': " + (fortran_order ? "True" : "False") + ", 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += shape.size() == 1 ? "," : ", ";
  }
  dict += "), }";

  static constexpr char kMagic[] = "\x93NUMPY";
  static constexpr std::size_t kAlign = 64;
  const bool v1 = dict.size() + 1 + 10 + kAlign <= 65535;
  const std::size_t prefix = v1 ? 10 : 12;
  // Pad with spaces and end in '\n' so the data starts on a 64-byte boundary.
  const std::size_t total = (prefix + dict.size() + 1 + kAlign - 1) / kAlign * kAlign;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';

  std::string out(kMagic, 6);
  out += static_cast<char>(v1 ? 1 : 2);
  out += '\0';
  const std::size_t len = dict.size();
  for (std::size_t b = 0; b < (v1 ? 2u : 4u); ++b)
    out += static_cast<char>((len >> (8 * b)) & 0xff);
  out += dict;
  return out;
}

}  // namespace moegrad::cli
