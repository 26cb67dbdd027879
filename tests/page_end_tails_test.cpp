// Tails that end where a mapping ends. A grad_x, y or grad_weight row, or
// the workspace, may end at the last byte of a mapping, and a kernel's tail
// must then read and write only the elements it owns. The AVX2 kernels'
// VMASKMOV may fault on masked-off lanes by AMD's manual (kernels/avx2/
// masked__avx2.h), so a partial vector that crosses a page end goes
// through a buffer on the stack instead, and one within a page keeps the
// instruction. Each kernel table this CPU runs is called on buffers that
// end right before a PROT_NONE page or a few elements short of it (so
// both ways are taken), for every tail length, and checked element by
// element against the contract's arithmetic written out here (one f32
// add; one std::fma chain; a copy). On a CPU whose masked-off lanes never
// fault (every Intel one, the Zen 5 this was written on) only the results
// can fail here; that no VMASKMOV is left outside masked__avx2.h is
// avx2_masked_moves_test.sh's to check.
#include <gtest/gtest.h>
#include <moegrad/moegrad.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "aligned_floats.h"
#include "kernels/gemm_kernels.h"

namespace {

using moegrad::kernels::GemmKernels;

// n floats whose last one ends `slack` floats before a page that faults on
// any access.
class GuardedFloats {
 public:
  explicit GuardedFloats(size_t n, size_t slack = 0) {
    n += slack;
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data_pages = (n * sizeof(float) + page - 1) / page;
    bytes_ = (data_pages + 1) * page;
    void* region = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) throw std::bad_alloc();
    region_ = static_cast<std::byte*>(region);
    if (mprotect(region_ + data_pages * page, page, PROT_NONE) != 0) throw std::runtime_error("mprotect");
    data_ = reinterpret_cast<float*>(region_ + data_pages * page) - n;
    std::memset(data_ + (n - slack), 0x7F, slack * sizeof(float));  // NaNs, which must stay
    slack_ = slack;
    n_ = n - slack;
  }
  ~GuardedFloats() { munmap(region_, bytes_); }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  float* data() { return data_; }
  float& operator[](size_t i) { return data_[i]; }
  // The floats between the last one and the guard page are as filled.
  bool slack_untouched() const {
    for (size_t i = 0; i < slack_; ++i) {
      uint32_t bits = 0;
      std::memcpy(&bits, data_ + n_ + i, sizeof bits);
      if (bits != 0x7F7F7F7Fu) return false;
    }
    return true;
  }

 private:
  size_t n_ = 0, slack_ = 0;
  std::byte* region_ = nullptr;
  size_t bytes_ = 0;
  float* data_ = nullptr;
};

std::vector<const GemmKernels*> tables() {
  std::vector<const GemmKernels*> out;
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512})
    if (const GemmKernels* k = moegrad::kernels::gemm_kernels_for(isa)) out.push_back(k);
  return out;
}

// Floats between a buffer's end and the guard page: 0 ends at the page,
// 1..7 leave a partial vector within it (AVX2: 4 + 4 * slack bytes).
constexpr size_t kSlacks[] = {0, 1, 3, 7};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Exactly representable values, different per index.
float value(size_t i, size_t salt) { return static_cast<float>(static_cast<int>((i * 7 + salt * 13) % 29) - 14) / 8; }

TEST(PageEndTails, AddRowAndStartRowStopAtTheirLastElement) {
  for (const GemmKernels* k : tables()) {
    for (size_t slack : kSlacks)
      for (size_t n = 1; n <= 40; ++n) {
        SCOPED_TRACE(std::string(moegrad_isa_name(k->isa)) + " n=" + std::to_string(n) + " slack=" +
                     std::to_string(slack));
        GuardedFloats dst(n, slack), src(n, slack);
        for (size_t j = 0; j < n; ++j) dst[j] = value(j, 1), src[j] = value(j, 2);
        k->add_row(dst.data(), src.data(), n);
        for (size_t j = 0; j < n; ++j) ASSERT_TRUE(same_bits(dst[j], value(j, 1) + value(j, 2))) << j;
        for (size_t j = 0; j < n; ++j) dst[j] = std::numeric_limits<float>::quiet_NaN();
        k->start_row(dst.data(), src.data(), n);
        for (size_t j = 0; j < n; ++j) ASSERT_TRUE(same_bits(dst[j], 0.0f + value(j, 2))) << j;
        EXPECT_TRUE(dst.slack_untouched());
      }
  }
}

// A micro-tile of mr x nr whose C rows are nr apart, the last ending at the
// guard page: C[r][c] = fma chain over p from +0 (or from C's own value).
TEST(PageEndTails, MicroKernelTileStopsAtItsLastElement) {
  const size_t kc = 5;
  const moegrad::kernels::PrefetchRows no_prefetch{};
  for (const GemmKernels* k : tables()) {
    const mgt::AlignedFloats a_panel(kc * k->mr), b_panel(kc * k->nr);  // 64-byte aligned, as in a workspace
    float* a = a_panel.data.get();
    float* b = b_panel.data.get();
    for (size_t i = 0; i < kc * k->mr; ++i) a[i] = value(i, 3);
    for (size_t i = 0; i < kc * k->nr; ++i) b[i] = value(i, 4);
    for (size_t mr : {size_t{1}, k->mr}) {
      for (size_t nr = 1; nr <= k->nr; ++nr) {
        for (bool accumulate : {false, true})
          for (size_t slack : kSlacks) {
            SCOPED_TRACE(std::string(moegrad_isa_name(k->isa)) + " mr=" + std::to_string(mr) + " nr=" +
                         std::to_string(nr) + (accumulate ? " accumulate" : "") + " slack=" + std::to_string(slack));
            GuardedFloats c(mr * nr, slack);
            for (size_t i = 0; i < mr * nr; ++i) c[i] = value(i, 5);
            k->ukernel(kc, a, b, c.data(), nr, mr, nr, accumulate, false, no_prefetch);
            for (size_t r = 0; r < mr; ++r)
              for (size_t col = 0; col < nr; ++col) {
                float want = accumulate ? value(r * nr + col, 5) : 0.0f;
                for (size_t p = 0; p < kc; ++p) want = std::fma(a[p * k->mr + r], b[p * k->nr + col], want);
                ASSERT_TRUE(same_bits(c[r * nr + col], want)) << "C[" << r << "][" << col << "]";
              }
            EXPECT_TRUE(c.slack_untouched());
          }
      }
    }
  }
}

// Packing A (the weight grad's x, the forward's x, grad_y) into a panel
// that ends at a guard page: A[p][r] = src[rows[r] * rs + (n0 + p) * cs],
// zero for r >= mr; from a row-major source (transposed) and from one
// contiguous along its rows (the weight grad's x seen as [K, M]).
TEST(PageEndTails, PackAStopsAtThePanelsEnd) {
  const size_t n0 = 3;
  for (const GemmKernels* k : tables()) {
    for (bool along_rows : {false, true}) {
      for (size_t kc : {size_t{1}, size_t{7}, size_t{16}}) {
        for (size_t mr : {size_t{1}, k->mr}) {
          SCOPED_TRACE(std::string(moegrad_isa_name(k->isa)) + (along_rows ? " along rows" : " row-major") +
                       " kc=" + std::to_string(kc) + " mr=" + std::to_string(mr));
          const size_t rows_total = k->mr + 2, cols_total = n0 + kc;
          std::vector<float> src(rows_total * cols_total);
          for (size_t i = 0; i < src.size(); ++i) src[i] = value(i, 8);
          const int64_t rs = along_rows ? 1 : static_cast<int64_t>(cols_total);
          const int64_t cs = along_rows ? static_cast<int64_t>(rows_total) : 1;
          std::vector<int32_t> rows(mr);
          for (size_t r = 0; r < mr; ++r) rows[r] = static_cast<int32_t>(r + 1);
          GuardedFloats a(kc * k->mr);
          for (size_t i = 0; i < kc * k->mr; ++i) a[i] = std::numeric_limits<float>::quiet_NaN();
          k->pack_a[0](src.data(), rs, cs, rows.data(), mr, n0, kc, a.data());  // [0]: f32
          for (size_t p = 0; p < kc; ++p)
            for (size_t r = 0; r < k->mr; ++r) {
              const float want = r < mr ? src[static_cast<size_t>(rows[r] * rs + static_cast<int64_t>(n0 + p) * cs)]
                                        : 0.0f;
              ASSERT_TRUE(same_bits(a[p * k->mr + r], want)) << "A[" << p << "][" << r << "]";
            }
        }
      }
    }
  }
}

// The row-vector engine's transposing scatter-add, with Ct's last column
// and the last token's grad_x row each ending at a guard page.
TEST(PageEndTails, AddColsStopsAtItsLastElement) {
  for (const GemmKernels* k : tables()) {
    if (k->rowvec == nullptr) continue;
    for (size_t rows : {size_t{1}, size_t{5}, size_t{8}, size_t{13}}) {
      for (size_t cols : {size_t{1}, size_t{7}, size_t{8}, size_t{21}}) {
        SCOPED_TRACE(std::string(moegrad_isa_name(k->isa)) + " rows=" + std::to_string(rows) + " cols=" +
                     std::to_string(cols));
        GuardedFloats ct(cols * rows), dst(rows * cols);  // ldct = rows; token r owns dst row r
        std::vector<int32_t> tokens(rows);
        for (size_t r = 0; r < rows; ++r) tokens[r] = static_cast<int32_t>(r);
        for (size_t i = 0; i < cols * rows; ++i) ct[i] = value(i, 6), dst[i] = value(i, 7);
        k->rowvec->add_cols(ct.data(), rows, rows, cols, dst.data(), static_cast<int64_t>(cols), tokens.data(), true,
                            nullptr);
        for (size_t r = 0; r < rows; ++r)
          for (size_t j = 0; j < cols; ++j)
            ASSERT_TRUE(same_bits(dst[r * cols + j], value(r * cols + j, 7) + value(j * rows + r, 6)))
                << "grad_x[" << r << "][" << j << "]";
      }
    }
  }
}

}  // namespace
