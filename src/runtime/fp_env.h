// SPEC §5 forbids flush-to-zero and denormals-are-zero and fixes
// round-to-nearest. A caller (or a framework) may have changed MXCSR on its
// thread; each worker sets the IEEE default for the duration of a run and
// restores what it found.
#pragma once

#include <xmmintrin.h>

namespace moegrad::runtime {

class ScopedIeeeFpEnv {
 public:
  // 0x1f80: all exceptions masked, round to nearest, FTZ and DAZ off.
  ScopedIeeeFpEnv() : saved_(_mm_getcsr()) { _mm_setcsr(0x1f80u | (saved_ & 0x3fu)); }
  ~ScopedIeeeFpEnv() { _mm_setcsr(saved_); }
  ScopedIeeeFpEnv(const ScopedIeeeFpEnv&) = delete;
  ScopedIeeeFpEnv& operator=(const ScopedIeeeFpEnv&) = delete;

 private:
  unsigned saved_;
};

}  // namespace moegrad::runtime
