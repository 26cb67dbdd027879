#include <immintrin.h>

#include <cstdint>

#include "kernels/avx2/kernels__avx2.h"

namespace moegrad::kernels::avx2 {
namespace {

// F16C conversion is exact and gives the same bits as the scalar path.
inline float widen_f16(uint16_t h) { return _cvtsh_ss(h); }

#include "kernels/pack_strided.inc"

}  // namespace

const PackAFn pack_a_6__avx2[kNumDTypes] = {
    pack_a_strided<DType::kF32>, pack_a_strided<DType::kF16>, pack_a_strided<DType::kBF16>};
const PackBFn pack_b_16__avx2[kNumDTypes] = {
    pack_b_strided<DType::kF32>, pack_b_strided<DType::kF16>, pack_b_strided<DType::kBF16>};

}  // namespace moegrad::kernels::avx2
