// The packed engine's canonical-NaN store (GemmBlocking::canonical_nans, the
// micro-kernels' canonical_nans), driven through packed_gemm_tile for every
// table this CPU runs, the fast bf16 mode's pair tables included, and both
// A layouts (reduction contiguous: rows copied where the table has the
// copied-rows kernel, AVX2 and AVX-512; transposed otherwise). The layer
// operators' tests reach it on the exact tables, one reduction block only;
// here the reduction is one block, three, or three with every NaN and
// infinity in the last (the only block whose store the flag changes).
//
// Inputs mix NaNs of both signs and random payloads (quiet and signalling),
// infinities, zeros and values in [-1, 1], so no product or sum overflows:
// which elements are NaN is then what a float64 loop over the same inputs
// says. With the flag, each of them must hold 0x7fc00000; without it, every
// element that is not NaN (most are finite) must keep the same bits as with
// it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include <moegrad/moegrad.h>

#include "driver/packed_gemm.h"
#include "float_formats.h"
#include "kernels/gemm_kernels.h"
#include "aligned_floats.h"
#include "runner.h"

namespace {

using moegrad::DType;
using moegrad::driver::GemmBlocking;
using moegrad::driver::GemmOperand;
using moegrad::driver::PackScratch;
using moegrad::kernels::GemmKernels;

constexpr uint32_t kCanonicalNan = 0x7fc00000u;

struct Table {
  const GemmKernels* kernels;
  DType dtype;  // f32 for the exact tables, bf16 for the pair tables
  const char* name;
};

std::vector<Table> tables() {
  std::vector<Table> out;
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    if (const GemmKernels* k = moegrad::kernels::gemm_kernels_for(isa)) out.push_back({k, DType::kF32, "exact"});
    if (const GemmKernels* k = moegrad::kernels::bf16_pair_kernels_for(isa)) out.push_back({k, DType::kBF16, "pairs"});
  }
  return out;
}

// One input value: with non_finite, a NaN (either sign, quiet or
// signalling, random payload) 1 in 128 and an infinity 1 in 128; a zero 1
// in 16; else in [-1, 1]. A 37-term output is then NaN about a third of
// the time, and finite mostly otherwise.
float random_value(std::mt19937& rng, bool non_finite) {
  const uint32_t kind = rng() % 128;
  if (kind == 0 && non_finite) {
    const uint32_t payload = (static_cast<uint32_t>(rng()) & 0x007fffffu) | 1u;  // never 0: an infinity
    return std::bit_cast<float>((static_cast<uint32_t>(rng()) & 0x80000000u) | 0x7f800000u | payload);
  }
  if (kind == 1 && non_finite) return (rng() & 1u) ? INFINITY : -INFINITY;
  if (kind < 10) return (rng() & 1u) ? 0.0f : -0.0f;
  return std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
}

// A bf16 table's input is bf16: the value rounded, and kept as f32 for the
// reference (bf16 widens exactly).
float as_input(DType dtype, float v) {
  return dtype == DType::kF32 ? v : mgt::bf16_bits_to_float(mgt::float_to_bf16_bits(v));
}

TEST(PackedGemmNan, CanonicalNansStoresEveryNanAsTheCanonicalOne) {
  const std::vector<Table> all = tables();
  ASSERT_FALSE(all.empty());
  struct Reduction {
    size_t len;
    size_t non_finite_from;  // the first step whose inputs may be NaN or infinite
  };
  constexpr size_t kc = 16;
  for (const Table& t : all) {
    for (const Reduction red : {Reduction{37, 0}, Reduction{12, 0}, Reduction{37, 32}}) {
      for (bool rows_contiguous : {true, false}) {
        const GemmKernels& k = *t.kernels;
        const size_t count = 2 * k.mr + 3, cols = 2 * k.nr + 5, len = red.len;
        std::ostringstream what;
        what << mgt::isa_label(k.isa) << " " << t.name << ", reduction " << len << " (non-finite from step "
             << red.non_finite_from << "), " << (rows_contiguous ? "A rows contiguous" : "A transposed");
        SCOPED_TRACE(what.str());
        std::mt19937 rng(7);
        std::vector<float> a(count * len), b(cols * len);  // values; a(r, p), b(j, p)
        for (size_t i = 0; i < count * len; ++i)
          a[i] = as_input(t.dtype, random_value(rng, i % len >= red.non_finite_from));
        for (size_t i = 0; i < cols * len; ++i)
          b[i] = as_input(t.dtype, random_value(rng, i % len >= red.non_finite_from));
        // The operands in the table's dtype, A either [count, len] or [len, count].
        const int64_t a_outer = rows_contiguous ? static_cast<int64_t>(len) : 1;
        const int64_t a_reduce = rows_contiguous ? 1 : static_cast<int64_t>(count);
        std::vector<float> a32(count * len), b32(cols * len);
        std::vector<uint16_t> a16(count * len), b16(cols * len);
        for (size_t r = 0; r < count; ++r)
          for (size_t p = 0; p < len; ++p) {
            const size_t at = r * static_cast<size_t>(a_outer) + p * static_cast<size_t>(a_reduce);
            a32[at] = a[r * len + p];
            a16[at] = mgt::float_to_bf16_bits(a[r * len + p]);
          }
        for (size_t i = 0; i < cols * len; ++i) b32[i] = b[i], b16[i] = mgt::float_to_bf16_bits(b[i]);
        const bool f32 = t.dtype == DType::kF32;
        const GemmOperand ao{f32 ? static_cast<const void*>(a32.data()) : a16.data(), a_outer, a_reduce};
        const GemmOperand bo{f32 ? static_cast<const void*>(b32.data()) : b16.data(), static_cast<int64_t>(len), 1};
        std::vector<int32_t> rows(count);
        for (size_t r = 0; r < count; ++r) rows[r] = static_cast<int32_t>(r);

        std::vector<float> c[2];
        for (bool canonical : {false, true}) {
          mgt::AlignedFloats a_pack(moegrad::kernels::a_pack_floats(k, count, kc) + 64),
              b_pack((cols + k.nr) * kc + 64);
          PackScratch scratch{a_pack.data.get(), b_pack.data.get()};
          std::vector<float>& out = c[canonical];
          out.assign(count * cols, std::bit_cast<float>(0x7fbadbadu));  // a NaN no path stores
          const GemmBlocking blk{&k, t.dtype, kc, canonical};
          moegrad::driver::packed_gemm_tile(blk, ao, rows.data(), count, bo, 0, cols, 0, static_cast<int64_t>(len),
                                            out.data(), cols, &scratch, -1, -1);
        }
        size_t nans = 0, uncanonical_without = 0, finite = 0;
        for (size_t r = 0; r < count; ++r)
          for (size_t j = 0; j < cols; ++j) {
            double sum = 0.0;
            for (size_t p = 0; p < len; ++p) sum += static_cast<double>(a[r * len + p]) * b[j * len + p];
            const uint32_t with = std::bit_cast<uint32_t>(c[1][r * cols + j]);
            const uint32_t without = std::bit_cast<uint32_t>(c[0][r * cols + j]);
            if (std::isnan(sum)) {
              ++nans;
              EXPECT_EQ(with, kCanonicalNan) << "c[" << r << ", " << j << "]";
              EXPECT_TRUE(std::isnan(c[0][r * cols + j])) << "c[" << r << ", " << j << "] without the flag";
              uncanonical_without += without != kCanonicalNan;
            } else {
              EXPECT_EQ(with, without) << "c[" << r << ", " << j << "]: the flag changed an element that is not NaN";
              EXPECT_FALSE(std::isnan(c[1][r * cols + j])) << "c[" << r << ", " << j << "]";
              finite += std::isfinite(sum);
            }
          }
        // The case must mix NaN and finite elements, and leave some NaN
        // uncanonical without the flag, or it could not fail.
        EXPECT_GT(nans, count * cols / 20);
        EXPECT_GT(finite, count * cols / 4);
        EXPECT_GT(uncanonical_without, 0u);
      }
    }
  }
}

}  // namespace
