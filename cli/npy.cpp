#include "npy.h"

#include <bit>
#include <cstring>
#include <string_view>

#include "cli_error.h"
#include "npy_header.h"

namespace moegrad::cli {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader maps little-endian data in place");

constexpr std::string_view kMagic = "\x93NUMPY";
// Generous for any shape (64 dims of 19 digits is under 2 KiB) yet small
// enough that a corrupt length field is refused instead of trusted.
constexpr uint64_t kMaxHeaderBytes = 65536;

struct DtypeInfo {
  NpyDtype dtype;
  std::string_view code;  // descr without the byte-order character
  int bytes;
  DLDataType dl;
};

constexpr DtypeInfo kDtypes[] = {
    {NpyDtype::kF32, "f4", 4, {kDLFloat, 32, 1}}, {NpyDtype::kF16, "f2", 2, {kDLFloat, 16, 1}},
    {NpyDtype::kU16, "u2", 2, {kDLUInt, 16, 1}},  {NpyDtype::kI64, "i8", 8, {kDLInt, 64, 1}},
    {NpyDtype::kI32, "i4", 4, {kDLInt, 32, 1}},
};

// '<' little, '=' native (little here), no prefix (NumPy reads it as native);
// '|' means "byte order not applicable" and NumPy writes it only for one-byte
// types, but some writers emit it for wider ones: on a little-endian host the
// only sensible reading is native. '>' is refused: we map data in place.
const DtypeInfo& parse_descr(std::string_view descr, std::string_view expected) {
  std::string_view code = descr;
  if (!code.empty() && (code[0] == '<' || code[0] == '=' || code[0] == '|')) {
    code.remove_prefix(1);
  } else if (!code.empty() && code[0] == '>') {
    code.remove_prefix(1);
    for (const DtypeInfo& d : kDtypes) {
      if (d.code == code) {
        throw NpyError("big-endian dtype '" + std::string(descr) +
                       "' is not supported; convert it with a.astype('<" + std::string(code) +
                       "')");
      }
    }
  }
  for (const DtypeInfo& d : kDtypes) {
    if (d.code == code) return d;
  }
  throw NpyError("unsupported dtype '" + std::string(descr) + "'; expected " + std::string(expected));
}

uint64_t read_le(const std::byte* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

std::string shape_text(std::span<const int64_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

const char* npy_descr(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::kF32:
      return "<f4";
    case NpyDtype::kF16:
      return "<f2";
    case NpyDtype::kU16:
      return "<u2";
    case NpyDtype::kI64:
      return "<i8";
    case NpyDtype::kI32:
      return "<i4";
  }
  return "?";
}

std::string NpyArray::shape_string() const { return shape_text(shape_); }

NpyArray NpyArray::load(const std::string& path, std::string_view expected) {
  NpyArray a;
  a.file_ = MappedFile::open(path);
  const std::span<const std::byte> f = a.file_.bytes();
  try {
    if (f.size() < kMagic.size() || std::memcmp(f.data(), kMagic.data(), kMagic.size()) != 0) {
      throw NpyError("not a .npy file (no \\x93NUMPY magic at the start)");
    }
    if (f.size() < 8) throw NpyError("truncated: the file ends inside the version field");
    const int major = static_cast<int>(f[6]);
    const int minor = static_cast<int>(f[7]);
    if ((major < 1 || major > 3) || minor != 0) {
      throw NpyError("unsupported .npy format version " + std::to_string(major) + "." +
                     std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
    }
    const int len_bytes = major == 1 ? 2 : 4;
    const std::size_t prefix = 8 + static_cast<std::size_t>(len_bytes);
    if (f.size() < prefix) throw NpyError("truncated: the file ends inside the header length");
    const uint64_t header_len = read_le(f.data() + 8, len_bytes);
    if (header_len > kMaxHeaderBytes) {
      throw NpyError("header of " + std::to_string(header_len) + " bytes is too long (limit " +
                     std::to_string(kMaxHeaderBytes) + ")");
    }
    if (f.size() - prefix < header_len) {
      throw NpyError("truncated: the header says " + std::to_string(header_len) +
                     " bytes but the file ends after " + std::to_string(f.size() - prefix));
    }
    // Versions 1 and 2 are latin-1, version 3 is UTF-8; every valid header is
    // ASCII either way, and anything else fails the grammar.
    const NpyHeader header = parse_npy_header(
        std::string_view(reinterpret_cast<const char*>(f.data() + prefix), header_len));
    const DtypeInfo& dt = parse_descr(header.descr, expected);

    // numpy's rule, whatever the order of the dimensions: the element size
    // times the product of the nonzero dimensions fits in a signed 64-bit
    // size; a zero dimension then makes the array empty.
    uint64_t data_bytes = static_cast<uint64_t>(dt.bytes);
    bool empty = false;
    for (const int64_t d : header.shape) {
      if (d == 0) {
        empty = true;
      } else if (__builtin_mul_overflow(data_bytes, static_cast<uint64_t>(d), &data_bytes) ||
                 data_bytes > static_cast<uint64_t>(INT64_MAX)) {
        throw NpyError("shape " + shape_text(header.shape) + " is too large: " + std::to_string(dt.bytes) +
                       "-byte elements times its nonzero dimensions exceed 2^63-1 bytes");
      }
    }
    if (empty) data_bytes = 0;
    const std::size_t data_offset = prefix + header_len;
    const uint64_t available = f.size() - data_offset;
    if (available < data_bytes) {
      throw NpyError("truncated: shape " + shape_text(header.shape) + " of " + header.descr +
                     " needs " + std::to_string(data_bytes) + " bytes of data, the file has " +
                     std::to_string(available));
    }
    if (available > data_bytes) {
      throw NpyError(std::to_string(available - data_bytes) +
                     " unexpected bytes after the data of shape " + shape_text(header.shape));
    }

    a.dtype_ = dt.dtype;
    a.fortran_order_ = header.fortran_order;
    a.shape_ = header.shape;
    const std::byte* data = f.data() + data_offset;
    // NumPy aligns data to 64 bytes; a foreign writer may not, and SIMD
    // kernels may assume at least element alignment. A copy is the safe fix
    // and costs nothing for files NumPy wrote.
    if (data_offset % AlignedBuffer::kAlignment != 0) {
      a.realigned_ = AlignedBuffer(data_bytes, path.c_str());
      if (data_bytes > 0) std::memcpy(a.realigned_.data(), data, data_bytes);
      data = a.realigned_.data();
    }

    const int ndim = static_cast<int>(a.shape_.size());
    a.tensor_.data = const_cast<std::byte*>(data);  // DLTensor has no const; we never write
    a.tensor_.device = {kDLCPU, 0};
    a.tensor_.ndim = ndim;
    a.tensor_.dtype = dt.dl;
    a.tensor_.shape = ndim > 0 ? a.shape_.data() : nullptr;
    a.tensor_.byte_offset = 0;
    a.tensor_.strides = nullptr;  // compact row-major
    if (a.fortran_order_ && ndim > 1) {
      // Column-major is the same bytes seen with reversed strides: no copy.
      a.strides_.resize(a.shape_.size());
      int64_t stride = 1;
      for (int i = 0; i < ndim; ++i) {
        a.strides_[i] = stride;
        // With a zero dimension nothing is ever addressed, so a stride that
        // would overflow is irrelevant; otherwise every partial product fits.
        if (__builtin_mul_overflow(stride, a.shape_[i], &stride)) stride = 0;
      }
      a.tensor_.strides = a.strides_.data();
    }
  } catch (const NpyError& e) {
    data_error(path + ": " + e.what());
  }
  return a;
}

void write_npy_f32(AtomicFile& out, const float* data, std::span<const int64_t> shape) {
  uint64_t count = 1;
  for (const int64_t d : shape) count *= static_cast<uint64_t>(d);
  const std::string header = format_npy_header("<f4", false, shape);
  out.write(header.data(), header.size());
  out.write(data, count * sizeof(float));
}

}  // namespace moegrad::cli
