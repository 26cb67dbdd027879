// The row-vector engine's narrow kernel (RowvecKernels::narrow_ukernel: a
// last panel of few grad_y rows, vectors along the strip's weight rows),
// called directly: the driver uses it on some CPUs only, so the API-level
// tests reach it only there. Checked on every CPU with the ISA, against the
// contract's chain written out with std::fma, and against the table's main
// kernel bit for bit; plus what it must leave alone and the strip staging it
// shares with the main kernel. And the scatter-add (add_cols) with a token's
// first row stored rather than added, element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm_kernels.h"

namespace {

using moegrad::kernels::GemmKernels;
using moegrad::kernels::NextStrip;
using moegrad::kernels::RowvecKernels;

// Every row-vector table this CPU can run (add_cols is shared by the exact
// and fast bf16 tables of an ISA).
std::vector<const RowvecKernels*> rowvec_tables() {
  std::vector<const RowvecKernels*> out;
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    const GemmKernels* k = moegrad::kernels::gemm_kernels_for(isa);
    if (k != nullptr && k->rowvec != nullptr) out.push_back(k->rowvec);
  }
  return out;
}

// Those of them with a narrow kernel.
std::vector<const RowvecKernels*> narrow_tables() {
  std::vector<const RowvecKernels*> out;
  for (const RowvecKernels* k : rowvec_tables())
    if (k->narrow_ukernel != nullptr) out.push_back(k);
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// n floats, the first on a 64-byte boundary (panels and strip buffers are
// aligned so in the workspace, and the kernels load them so).
class AlignedFloats {
 public:
  explicit AlignedFloats(size_t n, float fill = 0.0f) : storage_(n + 16, fill), n_(n) {
    const auto misalign = reinterpret_cast<uintptr_t>(storage_.data()) / sizeof(float) % 16;
    first_ = storage_.data() + (16 - misalign) % 16;
  }
  float* data() { return first_; }
  const float* data() const { return first_; }
  float& operator[](size_t i) { return first_[i]; }
  const float& operator[](size_t i) const { return first_[i]; }
  size_t size() const { return n_; }

 private:
  std::vector<float> storage_;
  size_t n_;
  float* first_;
};

struct Operands {
  AlignedFloats strip, panel;
  std::vector<float> ct0;
  size_t ldct;
};

// A strip ([STRIP][STRIP_LD], rows >= cols zero, as copy_strip leaves it),
// a panel ([kc][PANEL], rows >= `rows` zero) and a Ct tile ([STRIP][ldct])
// of values in [-1, 1]; fixed seed.
Operands make_operands(const RowvecKernels& k, size_t kc, size_t rows, size_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Operands o{AlignedFloats(k.strip_floats), AlignedFloats(kc * k.panel), {}, 2 * k.panel};
  for (size_t c = 0; c < cols; ++c)
    for (size_t p = 0; p < kc; ++p) o.strip[c * k.strip_ld + p] = u(rng);
  for (size_t p = 0; p < kc; ++p)
    for (size_t r = 0; r < rows; ++r) o.panel[p * k.panel + r] = u(rng);
  o.ct0.resize(k.strip * o.ldct);
  for (float& v : o.ct0) v = u(rng);
  return o;
}

// Ct[c][r] = (accumulate ? Ct[c][r] : +0.0f), then fma(A[p][r], W[c][p], .)
// for p = 0..kc-1, in float.
float contract_chain(const RowvecKernels& k, const Operands& o, size_t kc, size_t c, size_t r, bool accumulate) {
  float acc = accumulate ? o.ct0[c * o.ldct + r] : 0.0f;
  for (size_t p = 0; p < kc; ++p) acc = std::fma(o.panel[p * k.panel + r], o.strip[c * k.strip_ld + p], acc);
  return acc;
}

TEST(RowvecNarrowKernel, GivesTheContractChainAndTheMainKernelsBits) {
  const auto tables = narrow_tables();
  if (tables.empty()) GTEST_SKIP() << "no ISA with a narrow row-vector kernel on this CPU";
  for (const RowvecKernels* k : tables) {
    for (size_t kc : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{45}, k->max_kc}) {
      for (size_t rows = 1; rows <= k->narrow_rows; ++rows) {
        for (size_t cols : {size_t{1}, size_t{3}, size_t{8}, size_t{9}, k->strip}) {
          for (bool accumulate : {false, true}) {
            const std::string where = "kc " + std::to_string(kc) + ", rows " + std::to_string(rows) + ", cols " +
                                      std::to_string(cols) + (accumulate ? ", accumulating" : "");
            const Operands o = make_operands(*k, kc, rows, cols, kc * 1000 + rows * 10 + cols);
            std::vector<float> narrow = o.ct0, main = o.ct0;
            k->narrow_ukernel(kc, o.strip.data(), o.panel.data(), narrow.data(), o.ldct, rows, cols, accumulate,
                              NextStrip{});
            k->ukernel(kc, o.strip.data(), o.panel.data(), main.data(), o.ldct, rows, cols, accumulate, NextStrip{});
            size_t wrong = 0;
            for (size_t c = 0; c < cols; ++c)
              for (size_t r = 0; r < rows; ++r) {
                const float got = narrow[c * o.ldct + r];
                wrong += !same_bits(got, contract_chain(*k, o, kc, c, r, accumulate));
                wrong += !same_bits(got, main[c * o.ldct + r]);
              }
            EXPECT_EQ(wrong, 0u) << where;
          }
        }
      }
    }
  }
}

// Ct rows c >= cols are not written and their contents (NaN) do not reach
// the computed rows; nor is anything past the first panel's width in a row
// written (the contract lets a kernel write rows up to whole vectors, never
// past ldct's first PANEL floats here).
TEST(RowvecNarrowKernel, LeavesOtherRowsAndColumnsAlone) {
  const auto tables = narrow_tables();
  if (tables.empty()) GTEST_SKIP() << "no ISA with a narrow row-vector kernel on this CPU";
  for (const RowvecKernels* k : tables) {
    const size_t kc = 33, rows = k->narrow_rows, cols = 5;
    Operands o = make_operands(*k, kc, rows, cols, 77);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t c = cols; c < k->strip; ++c)
      for (size_t r = 0; r < o.ldct; ++r) o.ct0[c * o.ldct + r] = nan;  // NaN here must not reach Ct rows < cols
    for (size_t c = 0; c < cols; ++c)
      for (size_t r = k->panel; r < o.ldct; ++r) o.ct0[c * o.ldct + r] = nan;
    std::vector<float> ct = o.ct0;
    k->narrow_ukernel(kc, o.strip.data(), o.panel.data(), ct.data(), o.ldct, rows, cols, true, NextStrip{});
    for (size_t c = 0; c < k->strip; ++c)
      for (size_t r = 0; r < o.ldct; ++r) {
        const bool computed = c < cols && r < rows, may_write = c < cols && r < k->panel;
        if (computed) {
          EXPECT_TRUE(same_bits(ct[c * o.ldct + r], contract_chain(*k, o, kc, c, r, true))) << c << ", " << r;
        } else if (!may_write) {
          EXPECT_TRUE(same_bits(ct[c * o.ldct + r], o.ct0[c * o.ldct + r])) << "wrote Ct " << c << ", " << r;
        }
      }
  }
}

// Given a NextStrip with a copy buffer, the call copies those lines of the
// next strip's rows, whole, as the main kernel does (kernels/gemm_kernels.h).
TEST(RowvecNarrowKernel, CopiesTheNextStripWhileItComputes) {
  const auto tables = narrow_tables();
  if (tables.empty()) GTEST_SKIP() << "no ISA with a narrow row-vector kernel on this CPU";
  for (const RowvecKernels* k : tables) {
    for (size_t kc : {size_t{5}, size_t{64}, k->max_kc}) {
      const size_t rows = 3, cols = k->strip, lines = k->max_kc * sizeof(float) / 64, row_floats = k->max_kc + 48;
      const Operands o = make_operands(*k, kc, rows, cols, 5);
      // The next strip's source: STRIP weight rows, row_floats apart.
      AlignedFloats source(k->strip * row_floats), copy(k->strip_floats, -1.0f);
      for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<float>(i) * 0.5f;
      const float* first = source.data();
      float* dst = copy.data();
      const NextStrip next{reinterpret_cast<const std::byte*>(first),
                           static_cast<int64_t>(row_floats * sizeof(float)),
                           k->strip,
                           lines,
                           0,
                           k->strip * lines,
                           false,
                           dst,
                           k->strip_ld};
      std::vector<float> ct = o.ct0;
      k->narrow_ukernel(kc, o.strip.data(), o.panel.data(), ct.data(), o.ldct, rows, cols, false, next);
      size_t wrong = 0;
      for (size_t c = 0; c < k->strip; ++c)
        for (size_t p = 0; p < lines * 16; ++p) wrong += !same_bits(dst[c * k->strip_ld + p], first[c * row_floats + p]);
      EXPECT_EQ(wrong, 0u) << "kc " << kc;
      for (size_t c = 0; c < cols; ++c)
        for (size_t r = 0; r < rows; ++r)
          EXPECT_TRUE(same_bits(ct[c * o.ldct + r], contract_chain(*k, o, kc, c, r, false))) << c << ", " << r;
    }
  }
}

// rows x cols of Ct (ldct apart) into dst rows of tokens: rows with starts[r]
// get 0 + Ct on a NaN row (so any read of dst would show), the others add
// into a row holding a known value, and a token twice in the tile gets its
// two adds in row order; columns past cols and rows no token names stay NaN.
TEST(RowvecAddCols, StartsStoreZeroPlusTheValueAndTheRestAdd) {
  const auto tables = rowvec_tables();
  if (tables.empty()) GTEST_SKIP() << "no row-vector engine on this CPU";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const RowvecKernels* k : tables) {
    for (size_t rows : {1u, 7u, 16u, 19u}) {
      for (size_t cols : {1u, 8u, 13u, 33u}) {
        const size_t ldct = (rows + 15) / 16 * 16, dst_stride = cols + 5, tokens_n = rows + 3;
        std::mt19937 rng(static_cast<uint32_t>(rows * 100 + cols));
        std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
        std::vector<float> ct(cols * ldct);
        for (float& v : ct) v = uni(rng);
        // Token of row r: r / 2 (pairs of rows share a token); the first of a
        // pair starts the token's sum, except token 1, which already holds
        // 0.25 (it had rows in an earlier slot).
        std::vector<int32_t> tokens(rows);
        std::vector<uint8_t> starts(rows);
        for (size_t r = 0; r < rows; ++r) {
          tokens[r] = static_cast<int32_t>(r / 2);
          starts[r] = r % 2 == 0 && r / 2 != 1;
        }
        ct[0] = -0.0f;  // row 0, column 0: 0 + -0.0 is +0.0
        std::vector<float> dst(tokens_n * dst_stride, nan);
        for (size_t j = 0; j < dst_stride; ++j) dst[1 * dst_stride + j] = 0.25f;
        std::vector<float> want = dst;
        for (size_t r = 0; r < rows; ++r)
          for (size_t j = 0; j < cols; ++j) {
            float& w = want[static_cast<size_t>(tokens[r]) * dst_stride + j];
            w = starts[r] ? 0.0f + ct[j * ldct + r] : w + ct[j * ldct + r];
          }
        k->add_cols(ct.data(), ldct, rows, cols, dst.data(), static_cast<int64_t>(dst_stride), tokens.data(), true,
                    starts.data());
        for (size_t i = 0; i < dst.size(); ++i)
          ASSERT_TRUE(same_bits(dst[i], want[i]))
              << "panel " << k->panel << ", rows " << rows << ", cols " << cols << ", element " << i << ": "
              << dst[i] << " vs " << want[i];
        if (rows == 1) {
          EXPECT_TRUE(same_bits(dst[0], 0.0f)) << "0 + -0.0 must be +0.0";
        }
      }
    }
  }
}

}  // namespace
