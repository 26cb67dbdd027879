#include "guarded_output.h"

#include <cstring>
#include <utility>

namespace mgh {

uint64_t output_sentinel(DLDataType dtype) {
  if (same_dtype(dtype, kF32)) return 0x7f80deadu;
  if (same_dtype(dtype, kF16)) return 0x7d5au;
  if (same_dtype(dtype, kBF16)) return 0x7fa5u;
  if (same_dtype(dtype, kI32)) return 0x5aa5a55au;
  if (same_dtype(dtype, kI64)) return 0x5aa5a55aa55a5aa5u;
  return 0xa5a5a5a5a5a5a5a5u;
}

GuardedOutput::GuardedOutput(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                             bool null_strides, size_t front, size_t back, bool data_at_element0)
    : sentinel_(output_sentinel(dtype)) {
  if (strides.empty()) strides = compact_strides(shape);
  const bool compact = strides == compact_strides(shape);
  const Extent e = extent_of(shape, strides);
  const size_t elem = static_cast<size_t>((dtype.bits + 7) / 8);
  const size_t span = e.empty ? 0 : static_cast<size_t>(e.max_offset - e.min_offset + 1) * elem;
  bytes_ = front + span + back;
  block_.reset(new std::byte[bytes_ == 0 ? 1 : bytes_]);
  std::byte* origin = block_.get() + front + static_cast<size_t>(-e.min_offset) * elem;
  elements_ = Tensor::borrowed(origin, dtype, std::move(shape), std::move(strides));
  dl_ = elements_.dl();
  if (null_strides && compact) dl_.strides = nullptr;
  if (!data_at_element0) {
    dl_.data = block_.get();
    dl_.byte_offset = static_cast<uint64_t>(origin - block_.get());
  }
  reset();
}

void GuardedOutput::reset() {
  const size_t elem = static_cast<size_t>(elements_.elem_bytes());  // 2, 4 or 8
  for (size_t i = 0; i < bytes_; ++i) block_[i] = static_cast<std::byte>(sentinel_ >> (8 * (i % elem)));
  for (size_t e = 0; e < initial_.size(); ++e)
    elements_.set_bits(elements_.offset_of_linear(static_cast<int64_t>(e)), initial_[e]);
}

std::vector<std::byte> GuardedOutput::snapshot() const {
  return std::vector<std::byte>(block_.get(), block_.get() + bytes_);
}

std::string GuardedOutput::check_outside_elements(const std::vector<std::byte>& before) const {
  // The elements' bytes taken from now into a copy of before: any other
  // difference is a write outside them.
  std::vector<std::byte> expect = before;
  const size_t elem = static_cast<size_t>(elements_.elem_bytes());
  const auto* origin = static_cast<const std::byte*>(elements_.dl().data);
  for (int64_t e = 0; e < elements_.numel(); ++e) {
    const auto at =
        static_cast<size_t>(origin - block_.get() + elements_.offset_of_linear(e) * static_cast<int64_t>(elem));
    std::memcpy(&expect[at], &block_[at], elem);
  }
  if (expect == snapshot()) return "";
  size_t first = 0;
  while (expect[first] == block_[first]) ++first;
  return "byte " + std::to_string(first) + " of its " + std::to_string(bytes_) +
         "-byte allocation, outside its elements (element 0 at byte " + std::to_string(origin - block_.get()) +
         "), was written";
}

}  // namespace mgh
