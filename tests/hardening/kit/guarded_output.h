// An output tensor inside a larger allocation filled with a sentinel: guard
// bytes before and after the span its elements reach, and the gaps its
// strides leave between them. After any call no byte but its elements' may
// have changed, and after a refused one none at all. The sentinel is an
// element no result takes where one can tell (a non-canonical NaN, which
// no store of moegrad's arithmetic leaves; an index far beyond any small
// call's), so an element a successful call skipped still holds it.
// (No guard bytes: the allocation is exactly the span, and ASan sees any
// write beyond it.)
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor.h"

namespace mgh {

// f32 0x7f80dead, f16 0x7d5a, bf16 0x7fa5 (signalling NaNs), int32
// 0x5aa5a55a, int64 0x5aa5a55aa55a5aa5; other sizes 0xa5 bytes.
uint64_t output_sentinel(DLDataType dtype);

class GuardedOutput {
 public:
  // strides empty: compact row-major (DLTensor::strides NULL where
  // null_strides). data_at_element0: the DLTensor's data points at element
  // 0 with byte_offset 0, else at the allocation with the distance in
  // byte_offset.
  GuardedOutput(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, bool null_strides,
                size_t front, size_t back, bool data_at_element0);
  GuardedOutput(const GuardedOutput&) = delete;
  GuardedOutput& operator=(const GuardedOutput&) = delete;

  const DLTensor& dl() const { return dl_; }           // what a call is given
  const Tensor& elements() const { return elements_; }  // the same elements, to read
  uint64_t sentinel() const { return sentinel_; }

  // Element bits (row-major) the output holds before a call, such as an
  // accumulating call's input; without them, the sentinel.
  void set_initial(std::vector<uint64_t> bits) { initial_ = std::move(bits); }
  const std::vector<uint64_t>& initial() const { return initial_; }
  // The sentinel everywhere, then the initial elements.
  void reset();

  std::vector<std::byte> snapshot() const;
  // "" if every byte outside the elements is as in `before`.
  std::string check_outside_elements(const std::vector<std::byte>& before) const;

 private:
  std::unique_ptr<std::byte[]> block_;
  size_t bytes_ = 0;
  uint64_t sentinel_ = 0;
  Tensor elements_;  // borrowed from block_
  DLTensor dl_{};
  std::vector<uint64_t> initial_;
};

}  // namespace mgh
