// NumPy .npy arrays in and out of the CLI. An input is exposed as a DLTensor
// over the mapped file (no copy), with its own shape/strides storage; the
// output is always little-endian float32 in C order, written atomically.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aligned_buffer.h"
#include "atomic_file.h"
#include "mapped_file.h"

namespace moegrad::cli {

// The element types moegrad can consume. kU16 holds raw bfloat16 bits (NumPy
// has no bfloat16): the CLI relabels it only when asked to with --bf16.
enum class NpyDtype : uint8_t { kF32, kF16, kU16, kI64, kI32 };

// "<f4", "<f2", "<u2", "<i8", "<i4"
const char* npy_descr(NpyDtype dtype);

class NpyArray {
 public:
  // Throws CliError (exit 1) naming the path and the problem: missing file,
  // bad magic, unsupported version or dtype, big-endian data, malformed or
  // too-long header, overflowing shape, truncated or over-long data. An
  // unsupported dtype is refused with `expected`, the dtypes the caller
  // takes for this array (the loader reads all of NpyDtype; one flag takes
  // only some of them).
  static NpyArray load(const std::string& path,
                       std::string_view expected = "<f4, <f2, <u2 (bfloat16 bits), <i8 or <i4");

  NpyDtype dtype() const noexcept { return dtype_; }
  bool fortran_order() const noexcept { return fortran_order_; }
  std::span<const int64_t> shape() const noexcept { return shape_; }
  // "(2, 3)", for messages.
  std::string shape_string() const;

  // Points into this object; valid while it lives (moves keep it valid). Only
  // a Fortran-order array of rank >= 2 gets explicit (column-major) strides.
  const DLTensor& tensor() const noexcept { return tensor_; }
  // For relabelling the dtype (raw uint16 -> bfloat16).
  void set_dl_dtype(DLDataType dtype) noexcept { tensor_.dtype = dtype; }

 private:
  MappedFile file_;
  AlignedBuffer realigned_;  // only if the data offset in the file is unaligned
  NpyDtype dtype_ = NpyDtype::kF32;
  bool fortran_order_ = false;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  DLTensor tensor_{};
};

// Writes `data` ([shape...] float32, C order) as "<f4" into `out`; the caller
// commits. Kept separate from the file so the destination can be opened (and
// checked) before a long computation.
void write_npy_f32(AtomicFile& out, const float* data, std::span<const int64_t> shape);

}  // namespace moegrad::cli
