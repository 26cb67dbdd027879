// The fast bf16 mode's arithmetic, emulated in portable C++: the executable
// definition of the order the AVX512_BF16 kernel (vdpbf16ps) follows. Outside
// SPEC §5's contract, but fixed and reproducible:
//
//   the reduction is padded with one zero element to even length, then for
//   each pair m (elements 2m and 2m+1), in ascending m:
//     acc = ftz(fma(daz(a[2m+1]), daz(b[2m+1]), daz(acc)))
//     acc = ftz(fma(daz(a[2m]),   daz(b[2m]),   daz(acc)))
//
// daz: a denormal input reads as a zero of the same sign; ftz: a denormal
// result (after round-to-nearest-even) becomes a zero of the same sign.
// Panels hold bf16 pairs as one 32-bit word: low half element 2m, high 2m+1.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/scalar/kernels__scalar.h"

namespace moegrad::kernels::scalar {
namespace {

float flush_denormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

float bf16_bits_to_f32(uint32_t h) { return bf16_to_f32(static_cast<uint16_t>(h)); }

// One vdpbf16ps lane: acc += hi(a)*hi(b), then += lo(a)*lo(b).
float dot_pair(uint32_t a, uint32_t b, float acc) {
  acc = flush_denormal(std::fma(flush_denormal(bf16_bits_to_f32(a >> 16)), flush_denormal(bf16_bits_to_f32(b >> 16)),
                                flush_denormal(acc)));
  return flush_denormal(std::fma(flush_denormal(bf16_bits_to_f32(a & 0xffffu)),
                                 flush_denormal(bf16_bits_to_f32(b & 0xffffu)), flush_denormal(acc)));
}

uint32_t pair_at(const uint16_t* base, int64_t offset0, int64_t stride, size_t m, size_t n0, size_t kc) {
  const size_t e0 = 2 * m, e1 = 2 * m + 1;  // within [0, kc)
  const uint32_t lo = e0 < kc ? base[offset0 + static_cast<int64_t>(n0 + e0) * stride] : 0u;
  const uint32_t hi = e1 < kc ? base[offset0 + static_cast<int64_t>(n0 + e1) * stride] : 0u;
  return lo | (hi << 16);
}

// A[m][r] = pair (grad_y[rows[r], n0+2m], grad_y[rows[r], n0+2m+1])
void pack_a_pairs(const void* src, int64_t row_stride, int64_t col_stride, const int32_t* rows, size_t mr, size_t n0,
                  size_t kc, float* a_packed) {
  auto* out = reinterpret_cast<uint32_t*>(a_packed);
  const auto* base = static_cast<const uint16_t*>(src);
  for (size_t m = 0; m < (kc + 1) / 2; ++m)
    for (size_t r = 0; r < kMR; ++r)
      out[m * kMR + r] = r < mr ? pair_at(base, rows[r] * row_stride, col_stride, m, n0, kc) : 0u;
}

// B[m][c] = pair (weight_g[k0+c, n0+2m], weight_g[k0+c, n0+2m+1])
void pack_b_pairs(const void* src, int64_t k_stride, int64_t n_stride, size_t k0, size_t nr, size_t n0, size_t kc,
                  float* b_packed) {
  auto* out = reinterpret_cast<uint32_t*>(b_packed);
  const auto* base = static_cast<const uint16_t*>(src);
  for (size_t m = 0; m < (kc + 1) / 2; ++m)
    for (size_t c = 0; c < kNR; ++c)
      out[m * kNR + c] = c < nr ? pair_at(base, static_cast<int64_t>(k0 + c) * k_stride, n_stride, m, n0, kc) : 0u;
}

void bf16_gemm_ukernel_4x8__scalar(size_t kc, const float* a_packed, const float* b_packed, float* c, size_t ldc,
                                   size_t mr, size_t nr, bool accumulate) {
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
    for (size_t j = 0; j < nr; ++j) c[r * ldc + j] = acc[r][j];
}

// Only bf16 runs in pairs.
constexpr PackAFn kPackAPairs[kNumDTypes] = {nullptr, nullptr, pack_a_pairs};
constexpr PackBFn kPackBPairs[kNumDTypes] = {nullptr, nullptr, pack_b_pairs};

constinit const GemmKernels kPairKernels = {
    MOEGRAD_ISA_SCALAR, kMR, kNR, bf16_gemm_ukernel_4x8__scalar, kPackAPairs, kPackBPairs, f32_add_row__scalar,
    f32_start_row__scalar, nullptr, nullptr,
};

}  // namespace

const GemmKernels& bf16_pair_kernels() { return kPairKernels; }

}  // namespace moegrad::kernels::scalar
