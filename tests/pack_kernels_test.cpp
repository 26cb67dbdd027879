// The packed engine's packers (GemmKernels::pack_a and pack_b) of every table
// this CPU runs, called directly, in each layout they tell apart: the
// reduction contiguous, the other dimension contiguous, neither. grad-x
// reaches some of those branches on some paths only (with the reduction
// blocks it plans, AVX-512 copies gathered rows of a contiguous grad_y
// rather than transposing them), so the API-level tests would not notice
// one gone wrong. Each packed element is checked against its definition
// (gemm_kernels.h), widened by the test's own f16/bf16 decoders, bit for
// bit; the padding rows or columns must be +0.0, and nothing past the panel
// may be written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <moegrad/moegrad.h>

#include "float_formats.h"
#include "host_tensor.h"
#include "kernels/gemm_kernels.h"
#include "runner.h"

namespace {

using moegrad::DType;
using moegrad::kernels::GemmKernels;

constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

std::vector<const GemmKernels*> tables() {
  std::vector<const GemmKernels*> out;
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    if (const GemmKernels* k = moegrad::kernels::gemm_kernels_for(isa)) out.push_back(k);
  }
  return out;
}

// `elements` random finite values of one dtype (denormals included) in the
// test support's tensor, which widens them with its own decoders.
mgt::HostTensor random_source(DType dtype, size_t elements, uint32_t seed) {
  const auto t = static_cast<mgt::DType>(dtype);  // the same order: f32, f16, bf16
  mgt::HostTensor src(mgt::dl_type(t), {static_cast<int64_t>(elements)});
  const uint32_t exp_mask = t == mgt::DType::kF32 ? 0x7f800000u : t == mgt::DType::kF16 ? 0x7c00u : 0x7f80u;
  const uint32_t clear = t == mgt::DType::kF32 ? 0x40000000u : 0x4000u;  // an exponent bit: no Inf or NaN
  std::mt19937 rng(seed);
  for (size_t i = 0; i < elements; ++i) {
    uint32_t bits = t == mgt::DType::kF32 ? rng() : rng() & 0xffffu;
    if ((bits & exp_mask) == exp_mask) bits &= ~clear;
    src.set_bits(static_cast<int64_t>(i), bits);
  }
  return src;
}

// `n` floats on a 64-byte boundary (the workspace's panels are), NaN-filled,
// with NaN guards past them.
class Panel {
 public:
  explicit Panel(size_t n) : storage_(n + 16 + 64, std::numeric_limits<float>::quiet_NaN()), n_(n) {
    const auto misalign = reinterpret_cast<uintptr_t>(storage_.data()) / sizeof(float) % 16;
    first_ = storage_.data() + (16 - misalign) % 16;
  }
  float* data() { return first_; }
  float operator[](size_t i) const { return first_[i]; }
  bool guards_intact() const {
    for (size_t i = n_; i < n_ + 64; ++i)
      if (!std::isnan(first_[i])) return false;
    return true;
  }

 private:
  std::vector<float> storage_;
  size_t n_;
  float* first_;
};

// A matrix of `rows` x `cols` logical elements in a buffer, element (i, j)
// at i * row_stride + j * col_stride.
struct Layout {
  const char* name;
  int64_t row_stride, col_stride;
  size_t span;  // elements the buffer needs
};

std::vector<Layout> layouts(size_t rows, size_t cols) {
  return {{"reduction contiguous", static_cast<int64_t>(cols), 1, rows * cols},
          {"rows contiguous", 1, static_cast<int64_t>(rows), rows * cols},
          {"neither", static_cast<int64_t>(2 * cols), 2, 2 * rows * cols}};
}

std::string where(const GemmKernels& k, DType t, const Layout& l, size_t count, size_t n0, size_t kc) {
  std::ostringstream os;
  os << mgt::isa_label(k.isa) << " " << dtype_name(t) << " " << l.name << " count=" << count << " n0=" << n0
     << " kc=" << kc;
  return os.str();
}

// body(table, dtype, layout, source) for every table this CPU runs, dtype
// and layout of a rows x cols matrix, with random values from `seed`.
template <class Body>
void for_each_source(size_t rows, size_t cols, uint32_t seed, Body body) {
  for (const GemmKernels* k : tables())
    for (const DType t : kDTypes)
      for (const Layout& l : layouts(rows, cols)) body(*k, t, l, random_source(t, l.span, seed + static_cast<uint32_t>(t)));
}

// panel[p][j] (`width` floats a step) is want(p, j) bit for bit for j <
// used and +0.0 beyond; nothing past kc steps is written. Reports the first
// wrong element.
template <class Want>
void expect_panel(const Panel& panel, size_t kc, size_t width, size_t used, const std::string& what, Want want) {
  for (size_t p = 0; p < kc; ++p) {
    for (size_t j = 0; j < width; ++j) {
      const float expected = j < used ? want(p, j) : 0.0f;
      if (mgt::float_bits(panel[p * width + j]) != mgt::float_bits(expected)) {
        ADD_FAILURE() << what << ": [" << p << "][" << j << "] = " << panel[p * width + j] << ", want " << expected;
        return;
      }
    }
  }
  EXPECT_TRUE(panel.guards_intact()) << what << ": wrote past the panel";
}

// A[p][r] = grad_y[rows[r], n0 + p] for r < mr, +0.0 for mr <= r < MR; the
// rows either consecutive or every third (strictly ascending, as callers'
// are).
TEST(PackKernels, PackAGivesEachElementItsWidenedValue) {
  for_each_source(60, 300, 17, [](const GemmKernels& k, DType t, const Layout& l, const mgt::HostTensor& src) {
    for (const size_t step : {1u, 3u}) {
      for (size_t mr = 1; mr <= k.mr; ++mr) {
        std::vector<int32_t> rows(mr);
        for (size_t r = 0; r < mr; ++r) rows[r] = static_cast<int32_t>(2 + r * step);
        for (const size_t kc : {1u, 15u, 17u, 256u}) {
          const size_t n0 = kc == 256 ? 44 : 3;
          Panel a(kc * k.mr);
          k.pack_a[static_cast<int>(t)](src.view().data, l.row_stride, l.col_stride, rows.data(), mr, n0, kc, a.data());
          expect_panel(a, kc, k.mr, mr, where(k, t, l, mr, n0, kc) + " rows every " + std::to_string(step),
                       [&](size_t p, size_t r) {
                         return src.get_float(rows[r] * l.row_stride + static_cast<int64_t>(n0 + p) * l.col_stride);
                       });
        }
      }
    }
  });
}

// B[p][c] = weight[k0 + c, n0 + p] for c < nr, +0.0 for nr <= c < NR.
TEST(PackKernels, PackBGivesEachElementItsWidenedValue) {
  for_each_source(70, 300, 29, [](const GemmKernels& k, DType t, const Layout& l, const mgt::HostTensor& src) {
    for (size_t nr = 1; nr <= k.nr; ++nr) {
      for (const size_t kc : {1u, 15u, 17u, 256u}) {
        const size_t n0 = kc == 256 ? 44 : 5, k0 = 70 - nr;
        Panel b(kc * k.nr);
        k.pack_b[static_cast<int>(t)](src.view().data, l.row_stride, l.col_stride, k0, nr, n0, kc, b.data());
        expect_panel(b, kc, k.nr, nr, where(k, t, l, nr, n0, kc) + " k0=" + std::to_string(k0),
                     [&](size_t p, size_t c) {
                       return src.get_float(static_cast<int64_t>(k0 + c) * l.row_stride +
                                          static_cast<int64_t>(n0 + p) * l.col_stride);
                     });
      }
    }
  });
}

// The tests above see a table for every ISA the library runs here.
TEST(PackKernels, EveryAvailableIsaHasItsTable) {
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    EXPECT_EQ(moegrad::kernels::gemm_kernels_for(isa) != nullptr, moegrad_isa_available(isa) != 0) << mgt::isa_label(isa);
  }
  EXPECT_TRUE(moegrad_isa_available(MOEGRAD_ISA_SCALAR));
}

// The fast bf16 mode's packers (its tables: the scalar emulation's, and
// AVX512_BF16's where the CPU has it) hold a pair of reduction elements a
// 32-bit word: word m of a row or column is element n0 + 2m in the low
// half, n0 + 2m + 1 in the high half, a missing element (past kc) zero.
std::vector<const GemmKernels*> pair_tables() {
  std::vector<const GemmKernels*> out;
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX512}) {
    if (const GemmKernels* k = moegrad::kernels::bf16_pair_kernels_for(isa)) out.push_back(k);
  }
  return out;
}

// The pair word of elements at(2m) and at(2m + 1), read as raw bf16 bits.
template <class At>
uint32_t pair_word(const mgt::HostTensor& src, size_t m, size_t kc, At at) {
  const uint32_t lo = 2 * m < kc ? static_cast<uint32_t>(src.get_bits(at(2 * m))) : 0u;
  const uint32_t hi = 2 * m + 1 < kc ? static_cast<uint32_t>(src.get_bits(at(2 * m + 1))) : 0u;
  return lo | hi << 16;
}

// panel word [m][j] (`width` words a pair step) is want(m, j) for j < used
// and 0 beyond, for m < (kc + 1) / 2; nothing past those is written.
template <class Want>
void expect_pair_panel(const Panel& panel, size_t kc, size_t width, size_t used, const std::string& what, Want want) {
  const size_t pairs = (kc + 1) / 2;
  for (size_t m = 0; m < pairs; ++m) {
    for (size_t j = 0; j < width; ++j) {
      const uint32_t got = mgt::float_bits(panel[m * width + j]), expected = j < used ? want(m, j) : 0u;
      if (got != expected) {
        ADD_FAILURE() << what << ": pair [" << m << "][" << j << "] = 0x" << std::hex << got << ", want 0x"
                      << expected;
        return;
      }
    }
  }
  for (size_t i = pairs * width; i < pairs * width + 64; ++i)
    if (!std::isnan(panel[i])) {
      ADD_FAILURE() << what << ": wrote past the panel, word " << i;
      return;
    }
}

// Pair A[m][r] of rows[r] for r < mr, 0 for mr <= r < MR; rows
// consecutive (AVX512_BF16 interleaves two source rows where A is
// contiguous along them) or every third; kc odd and even.
TEST(PackKernels, PairPackAGivesEachWordItsTwoElements) {
  for (const GemmKernels* k : pair_tables()) {
    for (const Layout& l : layouts(60, 300)) {
      const mgt::HostTensor src = random_source(DType::kBF16, l.span, 41);
      for (const size_t step : {1u, 3u})
        for (size_t mr = 1; mr <= k->mr; ++mr) {
          std::vector<int32_t> rows(mr);
          for (size_t r = 0; r < mr; ++r) rows[r] = static_cast<int32_t>(2 + r * step);
          for (const size_t kc : {1u, 15u, 16u, 17u, 256u}) {
            const size_t n0 = kc == 256 ? 43 : 3;
            Panel a((kc + 1) / 2 * k->mr);
            k->pack_a[static_cast<int>(DType::kBF16)](src.view().data, l.row_stride, l.col_stride, rows.data(), mr,
                                                      n0, kc, a.data());
            expect_pair_panel(a, kc, k->mr, mr,
                              where(*k, DType::kBF16, l, mr, n0, kc) + " pairs, rows every " + std::to_string(step),
                              [&](size_t m, size_t r) {
                                return pair_word(src, m, kc, [&](size_t p) {
                                  return rows[r] * l.row_stride + static_cast<int64_t>(n0 + p) * l.col_stride;
                                });
                              });
          }
        }
    }
  }
}

// Pair B[m][c] of column k0 + c for c < nr, 0 for nr <= c < NR.
TEST(PackKernels, PairPackBGivesEachWordItsTwoElements) {
  for (const GemmKernels* k : pair_tables()) {
    for (const Layout& l : layouts(70, 300)) {
      const mgt::HostTensor src = random_source(DType::kBF16, l.span, 43);
      for (size_t nr = 1; nr <= k->nr; ++nr)
        for (const size_t kc : {1u, 15u, 16u, 17u, 256u}) {
          const size_t n0 = kc == 256 ? 43 : 5, k0 = 70 - nr;
          Panel b((kc + 1) / 2 * k->nr);
          k->pack_b[static_cast<int>(DType::kBF16)](src.view().data, l.row_stride, l.col_stride, k0, nr, n0, kc,
                                                    b.data());
          expect_pair_panel(b, kc, k->nr, nr, where(*k, DType::kBF16, l, nr, n0, kc) + " pairs", [&](size_t m, size_t c) {
            return pair_word(src, m, kc, [&](size_t p) {
              return static_cast<int64_t>(k0 + c) * l.row_stride + static_cast<int64_t>(n0 + p) * l.col_stride;
            });
          });
        }
    }
  }
}

}  // namespace
