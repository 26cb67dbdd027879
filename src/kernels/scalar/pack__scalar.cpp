#include <cstdint>

#include "kernels/scalar/kernels__scalar.h"

namespace moegrad::kernels::scalar {
namespace {

inline float widen_f16(uint16_t h) { return f16_to_f32(h); }

#include "kernels/pack_strided.inc"

}  // namespace

const PackAFn pack_a_4__scalar[kNumDTypes] = {pack_a_strided<DType::kF32>, pack_a_strided<DType::kF16>,
                                              pack_a_strided<DType::kBF16>};
const PackBFn pack_b_8__scalar[kNumDTypes] = {pack_b_strided<DType::kF32>, pack_b_strided<DType::kF16>,
                                              pack_b_strided<DType::kBF16>};

}  // namespace moegrad::kernels::scalar
