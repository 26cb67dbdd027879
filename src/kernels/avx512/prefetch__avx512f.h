// The micro-kernels' software prefetchers (kernels/prefetchers.inc) for the
// AVX-512 kernels.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_kernels.h"

namespace moegrad::kernels::avx512 {
namespace {

#include "kernels/prefetchers.inc"

}  // namespace
}  // namespace moegrad::kernels::avx512
