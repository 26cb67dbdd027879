// The .npy header dictionary: "{'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }" - a Python literal. Parsed as a tiny grammar, not by
// searching for substrings, so key order, spacing and trailing commas are all
// accepted and anything malformed is refused with the byte where it went wrong.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace moegrad::cli {

// A malformed or unsupported .npy file; the loader prefixes the path.
// Messages quote text from the file, which may hold any byte: control
// characters are escaped (\n, \xNN) so a message is always one line, and
// so are bytes >= 0x80, which need not form UTF-8, so a caller that decodes
// stderr as text (Python's subprocess) can.
class NpyError : public std::runtime_error {
 public:
  explicit NpyError(const std::string& message) : std::runtime_error(escape_to_ascii(message)) {}

 private:
  static std::string escape_to_ascii(const std::string& s) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c < 0x20 || c >= 0x7f) {
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out += ch;
      }
    }
    return out;
  }
};

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// NumPy allows 64 dimensions (NPY_MAXDIMS in NumPy 2).
inline constexpr std::size_t kNpyMaxDims = 64;

// `text` is the dictionary as stored (padding and final newline included).
// Exactly the keys descr, fortran_order and shape; throws NpyError.
NpyHeader parse_npy_header(std::string_view text);

// The complete prefix of a .npy file: magic, version, length and the padded
// dictionary, so the data starts 64-byte aligned as NumPy writes it. Version
// 1.0 unless the dictionary needs more than 65535 bytes.
std::string format_npy_header(std::string_view descr, bool fortran_order,
                              std::span<const int64_t> shape);

}  // namespace moegrad::cli
