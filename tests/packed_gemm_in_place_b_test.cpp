// packed_gemm_tile with a B contiguous along its outer dimension (the
// forward's weight, grad-x's [G, N, K] one), which the AVX-512 and AVX2
// tables' copied-rows kernels read in place instead of packing (f16 and
// bf16 widened as they are read), for every exact table this CPU runs and
// every dtype: each output element must be the one fp32 FMA chain of SPEC
// §5 (ascending reduction steps from +0.0) of the widened operands,
// computed here by a plain std::fma loop, bit for bit. The cases cover one
// reduction block and several (the calls request the next block's first
// panel), full column panels and a narrower last one (packed), no full
// panel at all, row counts in each of the kernels' short tiles, rows of B
// that start mid-line (a leading dimension that is no multiple of 16, a
// column offset), gathered A rows, and every column and row outside the
// tile left as it was; and the same in the fast bf16 mode's tables,
// against its pair chain.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <moegrad/moegrad.h>

#include "driver/packed_gemm.h"
#include "kernels/gemm_kernels.h"
#include "aligned_floats.h"
#include "fast_bf16_chain.h"
#include "float_formats.h"
#include "runner.h"

namespace {

using moegrad::DType;
using moegrad::driver::GemmBlocking;
using moegrad::driver::GemmOperand;
using moegrad::driver::PackScratch;
using moegrad::kernels::GemmKernels;

constexpr uint32_t kUnwritten = 0x7fbadbadu;  // a NaN no path stores

struct Case {
  size_t count, cols, len, ldb_extra, j0, p0;
};

// Whether the table reads such a B in place (its copied-rows kernels do),
// in every dtype its copied rows take.
bool reads_b_in_place(const GemmKernels& k) {
  if (k.rows_a == nullptr || k.rows_a->ukernel_in_place_b == nullptr) return false;
  for (int dt = 0; dt < moegrad::kNumDTypes; ++dt)
    if (k.rows_a->pack[dt] != nullptr && k.rows_a->ukernel_in_place_b[dt] == nullptr) return false;
  return true;
}

// Case cs's operands, random in [-1, 1) from `seed`, as elements of T
// (convert: from float): A, a [count + 2, p0 + len] buffer whose rows the
// tile gathers (in reverse); B, [p0 + len, ldb], element (j, p) at
// b[p * ldb + j], on a 64-byte boundary, so that a leading dimension of
// whole lines gives rows that start on a line.
template <typename T>
struct Operands {
  template <typename Convert>
  Operands(const Case& cs, uint32_t seed, Convert convert)
      : a_ld(cs.p0 + cs.len),
        ldb(cs.j0 + cs.cols + cs.ldb_extra),
        a((cs.count + 2) * a_ld),
        b_buf(((cs.p0 + cs.len) * ldb * sizeof(T) + sizeof(float) - 1) / sizeof(float)) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (T& v : a) v = convert(value(rng));
    for (size_t i = 0; i < (cs.p0 + cs.len) * ldb; ++i) b()[i] = convert(value(rng));
  }
  T* b() const { return reinterpret_cast<T*>(b_buf.data.get()); }

  size_t a_ld, ldb;
  std::vector<T> a;
  mgt::AlignedFloats b_buf;
};

// The cases, for a table's MR and NR (`odd` added to two lengths).
std::vector<Case> tile_cases(const GemmKernels& k, size_t odd) {
  const size_t kc = 256;
  return {
      {2 * k.mr + 3, 2 * k.nr + 5, 600 + odd, 7, 3, 5},  // three blocks, a narrow last panel, rows mid-line
      {k.mr, 3 * k.nr, kc, 0, 0, 0},                     // one block, whole aligned panels
      {1, k.nr, 1, 0, 0, 0},                             // one row, one step
      {5, k.nr - 3, 40 + odd, 1, 0, 2},                  // no full panel: all packed
      // Rows in place in each of the short tiles' row counts (AVX-512: 4,
      // 8, 14; AVX2: 2, 4, 6), each side of a boundary.
      {3, k.nr, 9 + odd, 0, 0, 0},
      {6, k.nr + 5, 33 + odd, 2, 1, 0},
      {9, 2 * k.nr, 70, 0, 0, 0},
      {k.mr + 5, 2 * k.nr + 1, 300 + odd, 3, 2, 1},  // two micro-panels: both calls read B in place
      {3 * k.mr, 4 * k.nr, 2 * kc + 1, 16, k.nr, 0},      // a last block of one step
  };
}

std::string case_label(const GemmKernels& k, const Case& cs, const char* tag) {
  std::ostringstream what;
  what << mgt::isa_label(k.isa) << tag << ": count " << cs.count << ", cols " << cs.cols << ", len " << cs.len
       << ", ldb cols+j0+" << cs.ldb_extra << ", j0 " << cs.j0 << ", p0 " << cs.p0;
  return what.str();
}

// packed_gemm_tile on case cs, elements of `dtype`: A's count rows gathered
// (in reverse) from a [count + 2, a_ld] buffer, B's element (j, p) at
// b[p * ldb + j], reduction block 256; C has two columns beyond the tile
// and one row below it. Element (r, j) must have the bits of want(row, j)
// (row: r's row of A), and nothing outside the tile may be written.
template <typename Want>
void check_tile(const GemmKernels& k, DType dtype, const Case& cs, const void* a, size_t a_ld, const void* b,
                size_t ldb, Want want) {
  const size_t kc = 256, a_rows = cs.count + 2;
  std::vector<int32_t> rows(cs.count);
  for (size_t r = 0; r < cs.count; ++r) rows[r] = static_cast<int32_t>(a_rows - 1 - r);
  const GemmOperand ao{a, static_cast<int64_t>(a_ld), 1};
  const GemmOperand bo{b, 1, static_cast<int64_t>(ldb)};
  mgt::AlignedFloats a_pack(moegrad::kernels::a_pack_floats(k, cs.count, kc) + 64), b_pack((cs.cols + k.nr) * kc + 64);
  PackScratch scratch{a_pack.data.get(), b_pack.data.get()};
  const size_t ldc = cs.cols + 2;
  std::vector<float> c((cs.count + 1) * ldc, std::bit_cast<float>(kUnwritten));
  const GemmBlocking blk{&k, dtype, kc, false};
  moegrad::driver::packed_gemm_tile(blk, ao, rows.data(), cs.count, bo, cs.j0, cs.cols, static_cast<int64_t>(cs.p0),
                                    static_cast<int64_t>(cs.len), c.data(), ldc, &scratch, -1, -1);
  size_t wrong = 0, touched = 0;
  for (size_t r = 0; r <= cs.count; ++r)
    for (size_t j = 0; j < ldc; ++j) {
      const uint32_t got = std::bit_cast<uint32_t>(c[r * ldc + j]);
      if (r == cs.count || j >= cs.cols) {
        touched += got != kUnwritten;
        continue;
      }
      const float expected = want(static_cast<size_t>(rows[r]), j);
      if (got != std::bit_cast<uint32_t>(expected) && wrong++ < 3)
        ADD_FAILURE() << "c[" << r << "][" << j << "] = " << c[r * ldc + j] << ", its chain gives " << expected;
    }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(touched, 0u) << "elements outside the tile were written";
}

// The case in dtype T (elements made by `convert` from floats, widened back
// by `widen`): each element the fp32 FMA chain of the widened operands.
template <typename T, typename Convert, typename Widen>
void check_fma_chain(const GemmKernels& k, DType dtype, const Case& cs, Convert convert, Widen widen) {
  const Operands<T> o(cs, 11, convert);
  const std::vector<T>& a = o.a;
  const T* const b = o.b();
  const size_t a_ld = o.a_ld, ldb = o.ldb;
  check_tile(k, dtype, cs, a.data(), a_ld, b, ldb, [&](size_t row, size_t j) {
    float acc = 0.0f;
    for (size_t p = 0; p < cs.len; ++p)
      acc = std::fma(widen(a[row * a_ld + cs.p0 + p]), widen(b[(cs.p0 + p) * ldb + cs.j0 + j]), acc);
    return acc;
  });
}

// Every dtype: f16 and bf16 are widened exactly, as they are read in place
// (AVX-512, AVX2) or packed (the scalar table).
TEST(PackedGemmInPlaceB, EveryElementIsTheFmaChain) {
  bool in_place_seen = false;
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    const GemmKernels* kp = moegrad::kernels::gemm_kernels_for(isa);
    if (kp == nullptr) continue;
    const GemmKernels& k = *kp;
    in_place_seen |= reads_b_in_place(k);
    if (k.rows_a != nullptr) {
      EXPECT_TRUE(reads_b_in_place(k)) << mgt::isa_label(isa) << ": a copied-rows table";
    }
    for (const Case& cs : tile_cases(k, 0)) {
      {
        SCOPED_TRACE(case_label(k, cs, " f32"));
        check_fma_chain<float>(k, DType::kF32, cs, [](float v) { return v; }, [](float v) { return v; });
      }
      {
        SCOPED_TRACE(case_label(k, cs, " f16"));
        check_fma_chain<uint16_t>(k, DType::kF16, cs, mgt::float_to_f16_bits, mgt::f16_bits_to_float);
      }
      {
        SCOPED_TRACE(case_label(k, cs, " bf16"));
        check_fma_chain<uint16_t>(k, DType::kBF16, cs, mgt::float_to_bf16_bits, mgt::bf16_bits_to_float);
      }
    }
  }
  // Where the CPU runs AVX2, its table (and AVX-512's) reads every dtype in
  // place (that packed_gemm_tile takes it is AKeyedPanelIsReusedOnlyWhenWhole's
  // check).
  if (moegrad::kernels::gemm_kernels_for(MOEGRAD_ISA_AVX2) != nullptr) {
    EXPECT_TRUE(in_place_seen);
  }
}

// The same cases in the fast bf16 mode's tables (the scalar emulation's,
// and AVX512_BF16's, whose copied-rows kernel reads a bf16 B in place,
// two rows interleaved per pair step): each element must be the mode's
// pair chain (tests/support/fast_bf16_chain.h) from the tile's first
// reduction step, bit for bit; odd lengths end with a half pair, and the
// reduction blocks (256) keep the pairs of one tile aligned.
TEST(PackedGemmInPlaceB, PairTablesGiveThePairChain) {
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX512}) {
    const GemmKernels* kp = moegrad::kernels::bf16_pair_kernels_for(isa);
    if (kp == nullptr) continue;
    const GemmKernels& k = *kp;
    if (isa == MOEGRAD_ISA_AVX512) {
      ASSERT_NE(k.rows_a, nullptr);
      EXPECT_NE(k.rows_a->pack[static_cast<int>(DType::kBF16)], nullptr);
      EXPECT_TRUE(reads_b_in_place(k)) << "the AVX512_BF16 table reads a bf16 B in place";
    }
    for (const Case& cs : tile_cases(k, 1)) {  // odd lengths: a half pair at the end
      SCOPED_TRACE(case_label(k, cs, " pairs"));
      const Operands<uint16_t> o(cs, 13, mgt::float_to_bf16_bits);
      const std::vector<uint16_t>& a = o.a;
      const uint16_t* const b = o.b();
      const size_t a_ld = o.a_ld, ldb = o.ldb;
      check_tile(k, DType::kBF16, cs, a.data(), a_ld, b, ldb, [&](size_t row, size_t j) {
        return mgt::fast_bf16_chain(
            static_cast<int64_t>(cs.len),
            [&](int64_t p) { return mgt::bf16_bits_to_float(a[row * a_ld + cs.p0 + static_cast<size_t>(p)]); },
            [&](int64_t p) { return mgt::bf16_bits_to_float(b[(cs.p0 + static_cast<size_t>(p)) * ldb + cs.j0 + j]); });
      });
    }
  }
}

// grad-x passes a key for its B panel so the tiles of one expert pack it
// once: after a call that read B in place, the panel in the scratch is whole
// (its full micro-panels packed by their first calls) only where the rows
// took more than one micro-panel. A second call with the same key, one
// block, must compute the FMA chain from whatever it reuses, in both orders
// of a one-micro-panel and a three-micro-panel call, in every dtype. The
// key the scratch holds afterwards shows which path ran: -1 after a
// call of at most two micro-panels (which all read B in place) that found
// no panel to reuse, only where B was read in place (so a dtype whose B the
// driver packed instead would fail here).
template <typename T, typename Convert, typename Widen>
void check_keyed_reuse(const GemmKernels& k, DType dtype, Convert convert, Widen widen) {
  const size_t kc = 256, a_rows = 3 * k.mr;
  const Case cs{a_rows - 2, 2 * k.nr + 3, 100, 5, 0, 0};  // Operands: a_rows rows of A
  const Operands<T> o(cs, 5, convert);
  const std::vector<T>& a = o.a;
  const T* const b = o.b();
  const size_t len = cs.len, cols = cs.cols, ldb = o.ldb;
  const GemmOperand ao{a.data(), static_cast<int64_t>(len), 1};
  const GemmOperand bo{b, 1, static_cast<int64_t>(ldb)};
  for (const bool small_first : {true, false}) {
    SCOPED_TRACE(std::string(mgt::isa_label(k.isa)) + " " + moegrad::dtype_name(dtype) +
                 (small_first ? ": 1 row, then 3 micro-panels" : ": 3 micro-panels, then 1 row"));
    mgt::AlignedFloats a_pack(moegrad::kernels::a_pack_floats(k, a_rows, kc) + 64), b_pack((cols + k.nr) * kc + 64);
    PackScratch scratch{a_pack.data.get(), b_pack.data.get()};
    const GemmBlocking blk{&k, dtype, kc, false};
    int64_t held_key = -1;
    for (const size_t count : small_first ? std::vector<size_t>{1, a_rows} : std::vector<size_t>{a_rows, 1}) {
      std::vector<int32_t> rows(count);
      for (size_t r = 0; r < count; ++r) rows[r] = static_cast<int32_t>((r * 5 + count) % a_rows);
      std::vector<float> c(count * cols, std::bit_cast<float>(kUnwritten));
      moegrad::driver::packed_gemm_tile(blk, ao, rows.data(), count, bo, 0, cols, 0, static_cast<int64_t>(len),
                                        c.data(), cols, &scratch, -1, /*b_key=*/7);
      size_t wrong = 0;
      for (size_t r = 0; r < count; ++r)
        for (size_t j = 0; j < cols; ++j) {
          float acc = 0.0f;
          for (size_t p = 0; p < len; ++p)
            acc = std::fma(widen(a[static_cast<size_t>(rows[r]) * len + p]), widen(b[p * ldb + j]), acc);
          wrong += std::bit_cast<uint32_t>(c[r * cols + j]) != std::bit_cast<uint32_t>(acc);
        }
      EXPECT_EQ(wrong, 0u) << count << " rows";
      // A panel held under the key is reused (the key stays); otherwise the
      // call leaves it whole, except a call of at most two micro-panels that
      // read it in place.
      const int64_t expected_key = held_key == 7 || !(reads_b_in_place(k) && count <= 2 * k.mr) ? 7 : -1;
      EXPECT_EQ(scratch.b_key, expected_key) << count << " rows";
      held_key = scratch.b_key;
    }
  }
}

TEST(PackedGemmInPlaceB, AKeyedPanelIsReusedOnlyWhenWhole) {
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    const GemmKernels* kp = moegrad::kernels::gemm_kernels_for(isa);
    if (kp == nullptr) continue;
    check_keyed_reuse<float>(*kp, DType::kF32, [](float v) { return v; }, [](float v) { return v; });
    check_keyed_reuse<uint16_t>(*kp, DType::kF16, mgt::float_to_f16_bits, mgt::f16_bits_to_float);
    check_keyed_reuse<uint16_t>(*kp, DType::kBF16, mgt::float_to_bf16_bits, mgt::bf16_bits_to_float);
  }
}

}  // namespace
