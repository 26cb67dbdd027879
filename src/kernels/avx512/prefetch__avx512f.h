// The micro-kernels' software prefetchers and strip stager
// (kernels/prefetchers.inc) for the AVX-512 kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/avx512/intrinsics__avx512f.h"
#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx512 {
namespace {

// One cache line of f32 from src into a strip row (64-byte aligned).
//
// Written as one asm statement because GCC 12, inlining the intrinsics into
// the row-vector kernels, also stored every copied line to a stack slot that
// nothing reads (`vmovaps %zmm1,-0x38(%rsp)` beside the real store; 4 such
// stores in f32_rowvec_ukernel_14x32__avx512f, 23 in the narrow one). Without
// them, ab_compare on a Zen 5, f32 (medians of runs of 15-31 rounds): zmoe
// 0.969-0.984x the time with one thread (5 runs), 0.967-1.004x with two
// (3 runs); fine-grained 0.954-0.958x / 0.928-0.973x. The operands name
// the two lines as memory, so the compiler still orders the copy against
// other accesses to them (as bytes of any type, like the intrinsics: the
// fast bf16 kernel reads its strips as int32 pairs). ASan does not look
// inside asm, so its builds keep the intrinsics: the same addresses, checked.
// GCC says ASan with __SANITIZE_ADDRESS__, clang 14 (the fuzz build) only
// through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define MOEGRAD_COPY_LINE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOEGRAD_COPY_LINE_UNDER_ASAN 1
#endif
#endif
__attribute__((always_inline)) inline void copy_line(float* dst, const std::byte* src) {
#if defined(MOEGRAD_COPY_LINE_UNDER_ASAN)
  _mm512_store_ps(dst, _mm512_loadu_ps(src));
#else
  struct __attribute__((may_alias)) Line {
    float words[16];
  };
  __m512 line;
  asm("vmovups %2, %1\n\tvmovaps %1, %0"
      : "=m"(*reinterpret_cast<Line*>(dst)), "=&v"(line)
      : "m"(*reinterpret_cast<const Line*>(src)));
#endif
}
#undef MOEGRAD_COPY_LINE_UNDER_ASAN

#include "kernels/prefetchers.inc"

}  // namespace
}  // namespace moegrad::kernels::avx512
