// The micro-kernels' software prefetchers (kernels/prefetchers.inc) for the
// AVX2 kernels.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx2 {
namespace {

#include "kernels/prefetchers.inc"

}  // namespace
}  // namespace moegrad::kernels::avx2
