// The test's own .npy writer, written from the format description rather than
// shared with the code under test, and able to produce every variant (and
// every defect) the reader must handle.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace moegrad::cli_test {

// Raw little-endian element bytes.
template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// "(2, 3)", "(5,)", "()"
inline std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The dictionary the way numpy.save writes it.
inline std::string numpy_dict(const std::string& descr, const std::vector<int64_t>& shape,
                              bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape_tuple(shape) + ", }";
}

// magic + version + length + dict (space-padded, '\n'-terminated to a 16-byte
// multiple, as old NumPy did; `align` 64 as NumPy >= 1.14 does) + data.
inline std::string npy_file(const std::string& dict, const std::string& data, int major = 1,
                            std::size_t align = 64) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  const std::size_t total = (prefix + header.size() + 1 + align - 1) / align * align;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  for (std::size_t b = 0; b < len_bytes; ++b)
    out += static_cast<char>((header.size() >> (8 * b)) & 0xff);
  return out + header + data;
}

template <class T>
std::string npy_array(const std::string& descr, const std::vector<int64_t>& shape,
                      const std::vector<T>& values) {
  return npy_file(numpy_dict(descr, shape), raw_bytes(values));
}

// Exact encodings of small integers (|v| < 2048), by hand: sign, biased
// exponent, mantissa.
inline uint16_t f16_bits(int v) {
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  unsigned a = static_cast<unsigned>(v < 0 ? -v : v);
  int e = 0;
  while ((a >> (e + 1)) != 0) ++e;
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | ((a << (10 - e)) & 0x3ff));
}

inline uint16_t bf16_bits(int v) {
  const float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);  // exact: small ints need 8 bits of mantissa
}

}  // namespace moegrad::cli_test
