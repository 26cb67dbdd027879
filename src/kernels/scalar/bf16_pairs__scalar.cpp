// The fast bf16 mode's arithmetic, emulated in portable C++: the executable
// definition of the order the AVX512_BF16 kernel (vdpbf16ps) follows. Outside
// SPEC §5's contract, but fixed and reproducible:
//
//   the reduction is padded with one zero element to even length, then for
//   each pair m (elements 2m and 2m+1), in ascending m:
//     acc = ftz(fma(daz(a[2m+1]), daz(b[2m+1]), daz(acc)))
//     acc = ftz(fma(daz(a[2m]),   daz(b[2m]),   daz(acc)))
//
// daz: a denormal input reads as a zero of the same sign. ftz: a tiny
// result becomes a zero of its sign, tininess detected after rounding as
// x86 does: the exact value rounded to nearest-even with 24 bits and an
// unbounded exponent is below 2^-126. That is every result the subnormal
// range rounds to, and also the exact values in
// [2^-126 - 2^-150, 2^-126 - 2^-151), which round to 2^-126 itself there
// but to 2^-126 - 2^-150 with the exponent unbounded.
// Panels hold bf16 pairs as one 32-bit word: low half element 2m, high 2m+1.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/canonical_nan.h"
#include "kernels/scalar/kernels__scalar.h"

namespace moegrad::kernels::scalar {
namespace {

float flush_denormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

// ftz(fma(a, b, c)) for normal or zero a, b (bf16 values) and c. Only a
// result of exactly +-2^-126 can hide a tiny value. It then came from terms
// below 2^-100 (a nonzero exact sum is a multiple of the smaller term's
// last bit), so the same fma scaled by 2^32 is exact in its scaling and
// rounds in the normal range, with 24 bits: tiny there is below 2^-94.
float fma_ftz(float a, float b, float c) {
  const float r = std::fma(a, b, c);
  if (std::fabs(r) != 0x1p-126f) return flush_denormal(r);
  return std::fabs(std::fma(a * 0x1p32f, b, c * 0x1p32f)) < 0x1p-94f ? std::copysign(0.0f, r) : r;
}

// daz(bf16 value) for the low 16 bits of h.
float bf16_daz(uint32_t h) { return flush_denormal(bf16_to_f32(static_cast<uint16_t>(h))); }

// One vdpbf16ps lane: acc += hi(a)*hi(b), then += lo(a)*lo(b).
float dot_pair(uint32_t a, uint32_t b, float acc) {
  acc = fma_ftz(bf16_daz(a >> 16), bf16_daz(b >> 16), flush_denormal(acc));
  return fma_ftz(bf16_daz(a & 0xffffu), bf16_daz(b & 0xffffu), flush_denormal(acc));
}

#include "kernels/pack_pairs_strided.inc"

void bf16_gemm_ukernel_4x8__scalar(size_t kc, const float* a_packed, const float* b_packed, float* c, size_t ldc,
                                   size_t mr, size_t nr, bool accumulate, bool canonical_nans, const PrefetchRows&) {
  float acc[kMR][kNR] = {};
  if (accumulate) {
    for (size_t r = 0; r < mr; ++r)
      for (size_t j = 0; j < nr; ++j) acc[r][j] = c[r * ldc + j];
  }
  const auto* a = reinterpret_cast<const uint32_t*>(a_packed);
  const auto* b = reinterpret_cast<const uint32_t*>(b_packed);
  for (size_t m = 0; m < (kc + 1) / 2; ++m)
    for (size_t r = 0; r < kMR; ++r)
      for (size_t j = 0; j < kNR; ++j) acc[r][j] = dot_pair(a[m * kMR + r], b[m * kNR + j], acc[r][j]);
  for (size_t r = 0; r < mr; ++r)
    for (size_t j = 0; j < nr; ++j) c[r * ldc + j] = canonical_nans ? canonical_nan(acc[r][j]) : acc[r][j];
}

// Only bf16 runs in pairs.
constexpr PackAFn kPackAPairs[kNumDTypes] = {nullptr, nullptr, pack_a_pairs_strided};
constexpr PackBFn kPackBPairs[kNumDTypes] = {nullptr, nullptr, pack_b_pairs_strided};

constinit const GemmKernels kPairKernels = {
    MOEGRAD_ISA_SCALAR, kMR, kNR, bf16_gemm_ukernel_4x8__scalar, kPackAPairs, kPackBPairs, f32_add_row__scalar,
    f32_start_row__scalar, nullptr, nullptr, 2,
};

}  // namespace

const GemmKernels& bf16_pair_kernels() { return kPairKernels; }

}  // namespace moegrad::kernels::scalar
