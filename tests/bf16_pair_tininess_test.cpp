// The fast bf16 mode's micro-kernels where its flush to zero is decided:
// sums next to 2^-126, the smallest normal float. Every pair table this CPU
// runs (the scalar emulation; the AVX512_BF16 kernel where the CPU has it)
// takes an accumulator within a few ulps of +-2^-126 and one pair of bf16
// products near 2^-150, and must give, bit for bit, the pair step written
// out in the tests (fast_bf16_chain.h: tininess after rounding, decided
// from the exact sum), so also the same bits as each other. About one sum
// in a hundred falls where deciding tininess before rounding would keep
// 2^-126 (17871 of 1792000 on the AVX-512 tile); the test counts them, so
// that it cannot pass without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <moegrad/moegrad.h>

#include "kernels/gemm_kernels.h"
#include "aligned_floats.h"
#include "fast_bf16_chain.h"
#include "float_formats.h"
#include "runner.h"

namespace {

using moegrad::kernels::GemmKernels;

float bf16_value(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// A bf16 of random sign and significand, exponent 2^(e +- 4).
uint16_t random_bf16(std::mt19937_64& rng, int e) {
  const auto exponent = static_cast<uint32_t>(127 + e + static_cast<int>(rng() % 9) - 4);
  return static_cast<uint16_t>(((rng() & 1) << 15) | (exponent << 7) | (rng() & 0x7f));
}

// Element t (0: low half, 1: high half) of a pair word.
float pair_element(uint32_t word, int64_t t) { return bf16_value(static_cast<uint16_t>(t == 1 ? word >> 16 : word)); }

// One pair step from acc: the tests' chain of two terms.
float pair_step(uint32_t a, uint32_t b, float acc) {
  return mgt::fast_bf16_chain(
      2, [&](int64_t t) { return pair_element(a, t); }, [&](int64_t t) { return pair_element(b, t); }, acc);
}

// The same step with tininess decided before rounding (the old emulation's
// rule: only a result the subnormal range rounds to is flushed).
float pair_step_flushing_denormals(uint32_t a, uint32_t b, float acc) {
  acc = mgt::flushed(std::fma(pair_element(a, 1), pair_element(b, 1), mgt::flushed(acc)));
  return mgt::flushed(std::fma(pair_element(a, 0), pair_element(b, 0), mgt::flushed(acc)));
}

TEST(Bf16PairTininess, EveryPairKernelFlushesAfterRounding) {
  std::vector<const GemmKernels*> tables;
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512})
    if (const GemmKernels* k = moegrad::kernels::bf16_pair_kernels_for(isa)) tables.push_back(k);
  ASSERT_FALSE(tables.empty()) << "the scalar emulation is always there";
  const moegrad::kernels::PrefetchRows no_prefetch;
  for (const GemmKernels* k : tables) {
    SCOPED_TRACE(moegrad_isa_name(k->isa));
    ASSERT_EQ(k->per_word, 2u);
    std::mt19937_64 rng(2026);
    // kc = 2: one word a row of A and a column of B, high half element 1.
    mgt::AlignedFloats a(k->mr), b(k->nr), c(k->mr * k->nr);
    size_t checked = 0, where_the_rules_differ = 0;
    for (int trial = 0; trial < 4000; ++trial) {
      auto* a_words = reinterpret_cast<uint32_t*>(a.data.get());
      auto* b_words = reinterpret_cast<uint32_t*>(b.data.get());
      for (size_t r = 0; r < k->mr; ++r)
        a_words[r] = static_cast<uint32_t>(trial % 4 == 0 ? 0 : random_bf16(rng, -75)) << 16 | random_bf16(rng, -75);
      for (size_t j = 0; j < k->nr; ++j)
        b_words[j] = static_cast<uint32_t>(random_bf16(rng, -75)) << 16 | random_bf16(rng, -76);
      std::vector<float> acc(k->mr * k->nr);
      for (float& v : acc) {
        const uint32_t bits = 0x00800000u + static_cast<uint32_t>(rng() % 64) - 8u;  // 2^-126, -8..+55 ulps
        v = std::bit_cast<float>(std::max(bits, 0x00800000u) | static_cast<uint32_t>(rng() & 1) << 31);
      }
      for (size_t i = 0; i < acc.size(); ++i) c.data.get()[i] = acc[i];
      k->ukernel(2, a.data.get(), b.data.get(), c.data.get(), k->nr, k->mr, k->nr, true, false, no_prefetch);
      for (size_t r = 0; r < k->mr; ++r)
        for (size_t j = 0; j < k->nr; ++j) {
          const float start = acc[r * k->nr + j];
          const float want = pair_step(a_words[r], b_words[j], start);
          where_the_rules_differ +=
              mgt::float_bits(pair_step_flushing_denormals(a_words[r], b_words[j], start)) != mgt::float_bits(want);
          ++checked;
          ASSERT_EQ(mgt::float_bits(c.data.get()[r * k->nr + j]), mgt::float_bits(want))
              << "trial " << trial << " C[" << r << "][" << j << "]: acc " << std::hex << mgt::float_bits(start)
              << ", a " << a_words[r] << ", b " << b_words[j];
        }
    }
    EXPECT_GT(where_the_rules_differ, checked / 200)
        << where_the_rules_differ << " of " << checked << " sums in the band the rules disagree on: too few";
  }
}

}  // namespace
