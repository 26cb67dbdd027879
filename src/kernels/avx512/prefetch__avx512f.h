// Software prefetch from inside a micro-kernel's reduction loop, one cache
// line per step: the kernel's FMAs hide the latency, and spreading the
// requests keeps the core's miss buffers from filling up (a burst of them
// before a pack stalls the core; measured slower). Used for data whose
// addresses no hardware prefetcher anticipates: the next weight strip (rows
// far apart) and the next gathered grad_y rows (in routing order). Internal
// linkage and always inlined, like the tiles.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx512 {
namespace {

struct NoPrefetch {
  __attribute__((always_inline)) void step() {}
};

#include "kernels/strip_prefetcher.inc"

// Walks a PrefetchRows list row by row.
struct RowsPrefetcher {
  const std::byte* first;
  const int32_t* rows;
  int64_t stride;
  size_t lines, line = 0, left;

  explicit RowsPrefetcher(const PrefetchRows& r)
      : first(r.first), rows(r.rows), stride(r.stride), lines(r.lines), left(r.count * r.lines) {}

  __attribute__((always_inline)) void step() {
    if (left == 0) return;
    _mm_prefetch(reinterpret_cast<const char*>(first + static_cast<int64_t>(*rows) * stride + 64 * line),
                 _MM_HINT_T0);
    --left;
    if (++line == lines) {
      line = 0;
      ++rows;
    }
  }
};

}  // namespace
}  // namespace moegrad::kernels::avx512
