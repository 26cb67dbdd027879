#include "tensor.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace mgh {

bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

std::string dtype_string(DLDataType t) {
  if (same_dtype(t, kF32)) return "float32";
  if (same_dtype(t, kF16)) return "float16";
  if (same_dtype(t, kBF16)) return "bfloat16";
  if (same_dtype(t, kI32)) return "int32";
  if (same_dtype(t, kI64)) return "int64";
  return "code=" + std::to_string(t.code) + " bits=" + std::to_string(t.bits) +
         " lanes=" + std::to_string(t.lanes);
}

double f16_bits_to_double(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else {
    v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

double bf16_bits_to_double(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

namespace {

[[noreturn]] void die(const char* what, double v) {
  std::fprintf(stderr, "mgh: %s: %.17g is not exactly representable\n", what, v);
  std::abort();
}

}  // namespace

uint16_t f16_bits_exact(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (std::isnan(v)) return 0x7e00;
  if (std::isinf(v)) return static_cast<uint16_t>(sign | 0x7c00);
  if (a == 0) return sign;
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int field = e - 1 + 15;
  double mant;
  uint16_t bits;
  if (field >= 1) {
    if (field > 30) die("f16", v);
    mant = (m * 2 - 1) * 1024;
    bits = static_cast<uint16_t>(field << 10);
  } else {
    mant = std::ldexp(a, 24);  // denormal: a = mant * 2^-24
    bits = 0;
  }
  if (mant != std::floor(mant) || mant >= 1024) die("f16", v);
  bits = static_cast<uint16_t>(sign | bits | static_cast<uint16_t>(mant));
  if (f16_bits_to_double(bits) != v) die("f16", v);
  return bits;
}

uint16_t bf16_bits_exact(double v) {
  const float f = static_cast<float>(v);
  if (static_cast<double>(f) != v) die("bf16", v);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0xffffu) != 0) die("bf16", v);
  return static_cast<uint16_t>(bits >> 16);
}

std::vector<int64_t> compact_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = step;
    step *= shape[d] > 0 ? shape[d] : 1;
  }
  return s;
}

Extent extent_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  Extent e;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) {
      e.empty = true;
      continue;
    }
    const int64_t span = strides[d] * (shape[d] - 1);
    (span < 0 ? e.min_offset : e.max_offset) += span;
  }
  if (e.empty) e.min_offset = e.max_offset = 0;
  return e;
}

Tensor::Tensor(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, bool null_strides,
               uint64_t pad_bytes)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)) {
  if (strides_.empty()) strides_ = compact_strides(shape_);
  const Extent e = extent_of(shape_, strides_);
  const int eb = elem_bytes() > 0 ? elem_bytes() : 1;
  // An empty tensor still gets a (tiny) allocation: a non-NULL data pointer.
  const size_t span = e.empty ? 1 : static_cast<size_t>(e.max_offset - e.min_offset + 1);
  storage_bytes_ = static_cast<size_t>(pad_bytes) + span * static_cast<size_t>(eb);
  storage_.reset(new std::byte[storage_bytes_]);
  std::memset(storage_.get(), 0, storage_bytes_);
  origin_ = storage_.get() + pad_bytes + static_cast<size_t>(-e.min_offset) * static_cast<size_t>(eb);
  dl_.data = storage_.get();
  dl_.byte_offset = static_cast<uint64_t>(origin_ - storage_.get());
  dl_.device = {kDLCPU, 0};
  dl_.ndim = static_cast<int32_t>(shape_.size());
  dl_.dtype = dtype_;
  dl_.shape = shape_.data();
  dl_.strides = null_strides && strides_ == compact_strides(shape_) ? nullptr : strides_.data();
}

Tensor Tensor::borrowed(void* origin, DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = strides.empty() ? compact_strides(t.shape_) : std::move(strides);
  t.origin_ = static_cast<std::byte*>(origin);
  t.dl_.data = origin;
  t.dl_.byte_offset = 0;
  t.dl_.device = {kDLCPU, 0};
  t.dl_.ndim = static_cast<int32_t>(t.shape_.size());
  t.dl_.dtype = dtype;
  t.dl_.shape = t.shape_.data();
  t.dl_.strides = t.strides_.data();
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

int64_t Tensor::offset(const std::vector<int64_t>& index) const {
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * strides_[d];
  return off;
}

int64_t Tensor::offset_of_linear(int64_t linear) const {
  int64_t off = 0;
  for (size_t d = shape_.size(); d-- > 0;) {
    off += (linear % shape_[d]) * strides_[d];
    linear /= shape_[d];
  }
  return off;
}

std::byte* Tensor::element_ptr(int64_t off) const { return origin_ + off * elem_bytes(); }

uint64_t Tensor::get_bits(int64_t off) const {
  uint64_t v = 0;
  std::memcpy(&v, element_ptr(off), static_cast<size_t>(elem_bytes()));
  return v;
}

void Tensor::set_bits(int64_t off, uint64_t bits) {
  std::memcpy(element_ptr(off), &bits, static_cast<size_t>(elem_bytes()));
}

double Tensor::get(int64_t off) const {
  const uint64_t b = get_bits(off);
  if (same_dtype(dtype_, kF32)) {
    const uint32_t w = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &w, sizeof f);
    return f;
  }
  if (same_dtype(dtype_, kF16)) return f16_bits_to_double(static_cast<uint16_t>(b));
  if (same_dtype(dtype_, kBF16)) return bf16_bits_to_double(static_cast<uint16_t>(b));
  return static_cast<double>(get_int(off));
}

void Tensor::set(int64_t off, double value) {
  if (same_dtype(dtype_, kF32)) {
    const float f = static_cast<float>(value);
    if (static_cast<double>(f) != value && !std::isnan(value)) die("f32", value);
    uint32_t w;
    std::memcpy(&w, &f, sizeof w);
    set_bits(off, w);
  } else if (same_dtype(dtype_, kF16)) {
    set_bits(off, f16_bits_exact(value));
  } else if (same_dtype(dtype_, kBF16)) {
    set_bits(off, bf16_bits_exact(value));
  } else {
    set_int(off, static_cast<int64_t>(value));
  }
}

int64_t Tensor::get_int(int64_t off) const {
  const uint64_t b = get_bits(off);
  switch (elem_bytes()) {
    case 1: return static_cast<int8_t>(b);
    case 2: return static_cast<int16_t>(b);
    case 4: return static_cast<int32_t>(b);
    default: return static_cast<int64_t>(b);
  }
}

void Tensor::set_int(int64_t off, int64_t value) { set_bits(off, static_cast<uint64_t>(value)); }

std::vector<std::byte> Tensor::snapshot() const {
  return std::vector<std::byte>(storage_.get(), storage_.get() + (storage_ ? storage_bytes_ : 0));
}

void Tensor::fill_bytes(uint8_t byte) {
  if (storage_) std::memset(storage_.get(), byte, storage_bytes_);
}

void Tensor::fill_words(uint32_t word) {
  fill_from({static_cast<uint8_t>(word), static_cast<uint8_t>(word >> 8), static_cast<uint8_t>(word >> 16),
             static_cast<uint8_t>(word >> 24)});
}

void Tensor::fill_from(const std::vector<uint8_t>& pattern) {
  if (!storage_ || pattern.empty()) return;
  for (size_t i = 0; i < storage_bytes_; ++i) storage_[i] = static_cast<std::byte>(pattern[i % pattern.size()]);
}

uint64_t Rng::next() {
  uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t Rng::uniform(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(span == 0 ? next() : next() % span);
}

}  // namespace mgh
