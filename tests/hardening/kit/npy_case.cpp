#include "npy_case.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_error.h"
#include "npy.h"
#include "npy_header.h"
#include "skip.h"

namespace mgh {
namespace {

using moegrad::cli::CliError;
using moegrad::cli::NpyArray;
using moegrad::cli::NpyError;

// SPEC §7: "one line on stderr". Of ASCII too: a byte >= 0x80 quoted from
// the file need not be UTF-8, and callers decode stderr as text. (Skippable
// as "npy-one-line".)
bool one_line(const char* s) {
  bool ascii = true;
  for (const char* p = s; *p != '\0'; ++p) ascii = ascii && static_cast<unsigned char>(*p) < 0x80;
  return s[0] != '\0' && ((ascii && std::strpbrk(s, "\r\n") == nullptr) || fuzz_skip("npy-one-line"));
}

int element_bytes(moegrad::cli::NpyDtype d) {
  switch (d) {
    case moegrad::cli::NpyDtype::kF32: return 4;
    case moegrad::cli::NpyDtype::kF16: return 2;
    case moegrad::cli::NpyDtype::kU16: return 2;
    case moegrad::cli::NpyDtype::kI64: return 8;
    case moegrad::cli::NpyDtype::kI32: return 4;
  }
  return 0;
}

// The input as a file NpyArray::load can open (it takes a path): a memfd's
// /proc/self/fd/N without touching the disk, or where that is refused
// (seccomp, gVisor, no /proc) a temporary file, removed when done.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("mgh_npy", MFD_CLOEXEC);
    if (fd_ >= 0) {
      path_ = "/proc/self/fd/" + std::to_string(fd_);
    } else {
      const char* dir = std::getenv("TMPDIR");
      std::string name = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/mgh_npy_XXXXXX";
      fd_ = mkstemp(name.data());
      if (fd_ < 0) return;
      path_ = unlink_ = name;
    }
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ok_ = done == size;
  }
  ~MemFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!unlink_.empty()) ::unlink(unlink_.c_str());
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::string path_, unlink_;
};

std::string check_header(std::string_view text) {
  moegrad::cli::NpyHeader h;
  try {
    h = moegrad::cli::parse_npy_header(text);
  } catch (const NpyError& e) {
    return one_line(e.what()) ? "" : "parse_npy_header: error message is not one line of ASCII";
  } catch (const std::exception& e) {
    return std::string("parse_npy_header threw a non-NpyError: ") + e.what();
  }
  if (h.shape.size() > moegrad::cli::kNpyMaxDims) return "parse_npy_header accepted more than 64 dimensions";
  for (int64_t d : h.shape)
    if (d < 0) return "parse_npy_header accepted a negative dimension";
  // What was parsed must survive the writer: format, strip the prefix, parse.
  std::string formatted;
  try {
    formatted = moegrad::cli::format_npy_header(h.descr, h.fortran_order, h.shape);
  } catch (const std::exception& e) {
    return std::string("format_npy_header threw: ") + e.what();
  }
  if (formatted.size() % 64 != 0) return "format_npy_header: length not a multiple of 64";
  if (formatted.size() < 10 || std::memcmp(formatted.data(), "\x93NUMPY", 6) != 0)
    return "format_npy_header: no magic";
  const size_t prefix = formatted[6] == 1 ? 10 : 12;
  moegrad::cli::NpyHeader back;
  try {
    back = moegrad::cli::parse_npy_header(std::string_view(formatted).substr(prefix));
  } catch (const std::exception& e) {
    // A descr containing a quote cannot be written back; that is the writer's
    // documented input (descr strings of the five dtypes), not a reader bug.
    if (h.descr.find_first_of("'\"\\") != std::string::npos) return "";
    return std::string("formatted header does not parse back: ") + e.what();
  }
  if (back.descr != h.descr || back.fortran_order != h.fortran_order || back.shape != h.shape)
    return "formatted header parses back differently";
  return "";
}

// A file in numpy's own header form (numpy.save writes a subset of these:
// version 1.0, padded to 64 bytes, fortran_order False below two
// dimensions), of a dtype the reader supports, decided here without the
// reader's code: what load must accept, and what it must then report.
struct CanonicalNpy {
  moegrad::cli::NpyDtype dtype;
  bool fortran_order;
  std::vector<int64_t> shape;
};

// The magic, version 1.0, 2.0 or 3.0, and where the header starts and how
// long its length field says it is; nullopt for anything else.
struct NpyPrefix {
  size_t prefix;
  size_t header_len;
};
std::optional<NpyPrefix> npy_prefix(const uint8_t* data, size_t size) {
  if (size < 8 || std::memcmp(data, "\x93NUMPY", 6) != 0 || data[6] < 1 || data[6] > 3 || data[7] != 0) return {};
  const size_t prefix = data[6] == 1 ? 10 : 12;
  if (size < prefix) return {};
  size_t header_len = data[8] | (size_t{data[9]} << 8);
  if (data[6] > 1) header_len |= (size_t{data[10]} << 16) | (size_t{data[11]} << 24);
  return NpyPrefix{prefix, header_len};
}

// The bytes of data numpy gives an array of this element size and shape;
// nullopt where it makes none ("array is too big": the element size times
// the nonzero dimensions exceeds 2^63 - 1 bytes, even for an empty array).
std::optional<uint64_t> numpy_data_bytes(int element, const std::vector<int64_t>& shape) {
  uint64_t bytes = static_cast<uint64_t>(element);
  bool empty = false;
  for (int64_t d : shape) {
    if (d == 0) empty = true;
    else if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) ||
             bytes > static_cast<uint64_t>(INT64_MAX))
      return {};
  }
  return empty ? 0 : bytes;
}

// The magic, version 1.0, 2.0 or 3.0 and its header length; then exactly
// "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" (one of the
// five little-endian descrs; shape "()", "(n,)" or "(n, m, ...)" in
// decimal without leading zeros, at most 8 dimensions each below 2^31),
// spaces, a newline; then exactly the data the shape needs.
std::optional<CanonicalNpy> canonical_npy(const uint8_t* data, size_t size) {
  const std::optional<NpyPrefix> start = npy_prefix(data, size);
  if (!start) return {};
  const auto [prefix, header_len] = *start;
  if (header_len > 4096 || size - prefix < header_len) return {};  // the reader's limit is 64 KiB
  std::string_view h(reinterpret_cast<const char*>(data) + prefix, header_len);
  auto eat = [&h](std::string_view lit) {
    if (h.substr(0, lit.size()) != lit) return false;
    h.remove_prefix(lit.size());
    return true;
  };
  CanonicalNpy c{};
  if (!eat("{'descr': '")) return {};
  struct Named {
    std::string_view descr;
    moegrad::cli::NpyDtype dtype;
  };
  constexpr Named kDescrs[] = {{"<f4", moegrad::cli::NpyDtype::kF32}, {"<f2", moegrad::cli::NpyDtype::kF16},
                               {"<u2", moegrad::cli::NpyDtype::kU16}, {"<i8", moegrad::cli::NpyDtype::kI64},
                               {"<i4", moegrad::cli::NpyDtype::kI32}};
  const Named* named =
      std::find_if(std::begin(kDescrs), std::end(kDescrs), [&](const Named& n) { return eat(n.descr); });
  if (named == std::end(kDescrs) || !eat("', 'fortran_order': ")) return {};
  c.dtype = named->dtype;
  if (eat("True")) c.fortran_order = true;
  else if (!eat("False")) return {};
  if (!eat(", 'shape': (")) return {};
  auto is_digit = [&h](size_t i) { return h.size() > i && h[i] >= '0' && h[i] <= '9'; };
  if (!eat(")")) {
    for (;;) {
      if (!is_digit(0) || (h[0] == '0' && is_digit(1))) return {};
      int64_t d = 0;
      while (is_digit(0)) {
        d = d * 10 + (h[0] - '0');
        if (d >= (int64_t{1} << 31)) return {};
        h.remove_prefix(1);
      }
      c.shape.push_back(d);
      if (c.shape.size() == 1 ? eat(",)") : eat(")")) break;  // "(n,)", "(n, m)"
      if (c.shape.size() == 8 || !eat(", ")) return {};
    }
  }
  if (!eat(", }")) return {};
  while (eat(" ")) {
  }
  if (h != "\n") return {};
  const std::optional<uint64_t> bytes = numpy_data_bytes(element_bytes(c.dtype), c.shape);
  if (!bytes || size - prefix - header_len != *bytes) return {};
  return c;
}

// What a loaded file must be, read from its own bytes: the magic, a
// version 1.0, 2.0 or 3.0, a shape numpy could make, and exactly its
// header plus the data that shape needs (the reader refuses trailing
// bytes: "unexpected bytes after the data" in cli/npy.cpp).
std::string accepted_file_is_whole(const uint8_t* data, size_t size, const NpyArray& a) {
  const std::optional<NpyPrefix> start = npy_prefix(data, size);
  if (!start) return "NpyArray::load accepted a file without the magic, a known version or its header length";
  const std::optional<uint64_t> bytes =
      numpy_data_bytes(element_bytes(a.dtype()), std::vector<int64_t>(a.shape().begin(), a.shape().end()));
  if (!bytes) return "NpyArray::load accepted a shape numpy calls too big";
  if (*bytes > size || start->prefix + start->header_len + *bytes != size)
    return "NpyArray::load accepted a file that is not its header plus its data, exactly";
  return "";
}

std::string check_load(const uint8_t* data, size_t size) {
  MemFile file(data, size);
  if (!file.ok()) return "cannot write the input to a memfd or a temporary file to load it";
  const std::optional<CanonicalNpy> canonical = canonical_npy(data, size);
  try {
    const NpyArray a = NpyArray::load(file.path());
    if (canonical) {
      if (a.dtype() != canonical->dtype || a.fortran_order() != canonical->fortran_order ||
          !std::equal(a.shape().begin(), a.shape().end(), canonical->shape.begin(), canonical->shape.end()))
        return "NpyArray::load read a file in numpy's form as another dtype, order or shape";
    }
    if (const std::string e = accepted_file_is_whole(data, size, a); !e.empty()) return e;
    const DLTensor& t = a.tensor();
    const int eb = element_bytes(a.dtype());
    if (t.ndim != static_cast<int32_t>(a.shape().size())) return "tensor ndim != header rank";
    if (t.device.device_type != kDLCPU || t.dtype.lanes != 1 || t.dtype.bits != eb * 8)
      return "tensor device/dtype inconsistent with the header";
    uint64_t count = 1;
    for (int d = 0; d < t.ndim; ++d) {
      if (t.shape[d] != a.shape()[static_cast<size_t>(d)] || t.shape[d] < 0) return "tensor shape != header shape";
      count *= static_cast<uint64_t>(t.shape[d]);
    }
    const uint64_t bytes = count * static_cast<uint64_t>(eb);
    if (bytes > size) return "loaded more data than the file holds";
    if (t.data == nullptr && count > 0) return "NULL data for a non-empty array";
    const std::byte* p = static_cast<const std::byte*>(t.data) + t.byte_offset;
    if (eb > 0 && reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(eb) != 0) return "data not element-aligned";
    // The data must be the file's last `bytes` bytes (read them all: ASan
    // checks every access).
    if (bytes > 0 && std::memcmp(p, data + (size - bytes), bytes) != 0) return "data differs from the file's bytes";
    if (t.strides != nullptr) {
      if (!a.fortran_order() || t.ndim < 2) return "explicit strides on a C-order or 1-D array";
      int64_t expect = 1;
      for (int d = 0; d < t.ndim; ++d) {
        if (count > 0 && t.strides[d] != expect) return "Fortran strides are not column-major";
        expect *= t.shape[d];
      }
    }
  } catch (const CliError& e) {
    if (canonical) return std::string("NpyArray::load refused a file in numpy's form: ") + e.what();
    return one_line(e.what()) ? "" : "NpyArray::load: error message is not one line of ASCII";
  } catch (const std::exception& e) {
    return std::string("NpyArray::load threw a non-CliError: ") + e.what();
  }
  return "";
}

}  // namespace

std::string check_npy_input(const uint8_t* data, size_t size) {
  // The header grammar directly (no magic needed), then the whole loader.
  if (std::string e = check_header(std::string_view(reinterpret_cast<const char*>(data), size)); !e.empty())
    return e;
  return check_load(data, size);
}

}  // namespace mgh
