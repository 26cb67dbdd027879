// The byte size of a dense tensor, checked: every buffer a command allocates
// is sized through it before anything is allocated, so a shape whose size
// needs more than 64 bits is reported as such (by the caller, in its own
// words) instead of wrapping to a small allocation.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace moegrad::cli {

// bytes = element_bytes * product(dims); false (bytes untouched) if a
// dimension is negative or the product needs more than 64 bits.
inline bool dense_bytes(std::initializer_list<int64_t> dims, uint64_t element_bytes, uint64_t* bytes) {
  uint64_t p = element_bytes;
  for (const int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(p, static_cast<uint64_t>(d), &p)) return false;
  }
  *bytes = p;
  return true;
}

}  // namespace moegrad::cli
