// A float buffer on a 64-byte boundary, as a workspace places the packing
// buffers (for the tests that drive the packed engine directly).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace mgt {

struct AlignedFloats {
  explicit AlignedFloats(size_t floats)
      : data(static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64)), &std::free) {}
  std::unique_ptr<float, void (*)(void*)> data;
};

}  // namespace mgt
