// SPEC §4: "Dimensions up to 2^31 - 1 each; all offset arithmetic is 64-bit
// and overflow-checked."
//  * tensors whose strides (and byte_offset) put elements more than 2^32
//    elements - and well past 4 GiB - from their base, in sparse
//    MAP_NORESERVE mappings (only the touched pages are ever committed);
//  * routing positions near and above 2^31 - 1 with a matching batch*top_k;
//  * the batch*top_k int64 overflow check, dimension and stride limits.
#include <moegrad/moegrad.h>
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "reference.h"
#include "runner.h"
#include "scoped_env.h"
#include "tensor.h"

namespace mgh {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t k2To32 = int64_t{1} << 32;

// A private anonymous mapping that reserves no swap: only touched pages are
// committed, so a 40 GiB view costs a few pages.
class SparseRegion {
 public:
  explicit SparseRegion(uint64_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  ~SparseRegion() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  SparseRegion(const SparseRegion&) = delete;
  SparseRegion& operator=(const SparseRegion&) = delete;
  bool ok() const { return base_ != nullptr; }
  std::byte* base() const { return base_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::byte* base_ = nullptr;
  uint64_t bytes_;
};

// A tensor in its own sparse region, sized to the extent of its strides;
// element 0 is placed `gap` bytes plus the negative part of the extent in.
// With a gap, DLTensor::data is the region start and element 0 is reached
// through byte_offset.
struct SparseTensor {
  std::unique_ptr<SparseRegion> region;
  Tensor t;
  SparseTensor(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, uint64_t gap = 0) {
    const Extent e = extent_of(shape, strides);
    const uint64_t eb = static_cast<uint64_t>(dtype.bits / 8);
    const uint64_t lead = gap + static_cast<uint64_t>(-e.min_offset) * eb;
    region = std::make_unique<SparseRegion>(lead + static_cast<uint64_t>(e.max_offset + 1) * eb);
    if (!region->ok()) return;
    t = Tensor::borrowed(region->base() + lead, dtype, shape, strides);
    if (gap > 0) {
      t.dl().data = region->base();
      t.dl().byte_offset = lead;
    }
  }
  bool ok() const { return region->ok(); }
};

std::string isa_label(moegrad_isa isa) { return moegrad_isa_name(isa); }

class Offsets64 : public ::testing::TestWithParam<std::tuple<moegrad_isa, DLDataType>> {};

// Expanded rows -> positions (type 0), for batch 4, top_k 2, experts {2, 0, 4}.
const std::vector<int64_t> kPositions = {5, 0, 7, -1, 2, 6};
const std::vector<int64_t> kCounts = {2, 0, 4};

TEST_P(Offsets64, StridesPastFourGiB) {
  const auto [isa, dtype] = GetParam();
  if (!moegrad_isa_available(isa)) GTEST_SKIP() << isa_label(isa) << " is not available on this CPU";
  const int64_t batch = 4, top_k = 2, G = 3, K = 9, N = 7, M = 6, L = 6;

  // Element offsets beyond 2^32 in every tensor (max offsets in comments).
  const uint64_t k5GiB = uint64_t{5} << 30;
  SparseTensor gy(dtype, {M, N}, {k2To32 / 2 + 3, 1}, k5GiB);   // 5 * (2^31 + 3) + 6, byte_offset 5 GiB
  SparseTensor w(dtype, {G, K, N}, {-(k2To32 + 5), 1, K});      // -2 * (2^32 + 5): a [G, N, K] buffer, experts reversed
  SparseTensor idx(kI64, {L}, {k2To32 / 4 + 1});                // 5 * (2^30 + 1)
  SparseTensor gl(kI32, {G}, {k2To32 + 7});                     // 2 * (2^32 + 7)
  SparseTensor gx(kF32, {batch, K}, {1, k2To32 / 4 + 1}, k5GiB);  // 3 + 8 * (2^30 + 1), column-major
  for (SparseTensor* s : {&gy, &w, &idx, &gl, &gx})
    if (!s->ok()) GTEST_SKIP() << "this system refuses large MAP_NORESERVE mappings (vm.overcommit_memory=2?)";
  ASSERT_GT(gy.t.dl().byte_offset, uint64_t{4} << 30);  // element 0 itself lies past 4 GiB from data

  Rng rng(7);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) gy.t.set(gy.t.offset({i, n}), static_cast<double>(rng.uniform(-4, 4)));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) w.t.set(w.t.offset({g, k, n}), static_cast<double>(rng.uniform(-4, 4)));
  for (int64_t i = 0; i < L; ++i) idx.t.set_int(idx.t.offset({i}), kPositions[static_cast<size_t>(i)]);
  for (int64_t g = 0; g < G; ++g) gl.t.set_int(gl.t.offset({g}), kCounts[static_cast<size_t>(g)]);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t k = 0; k < K; ++k) gx.t.set_bits(gx.t.offset({b, k}), 0x7FC0DEADu);

  moegrad_grad_x_args a{&gy.t.dl(), &w.t.dl(), &idx.t.dl(), &gl.t.dl(), &gx.t.dl(), batch, top_k, 0, 0};
  RunOptions opt;
  opt.plan_ctx = shared_context(isa, 2);
  opt.run_ctx = opt.plan_ctx;
  const RunResult r = run_grad_x(&a, opt);
  ASSERT_TRUE(r.ok()) << r.describe();

  const std::vector<float> got = read_grad_x(gx.t.dl());
  EXPECT_EQ(compare_bits(got, reference_contract(a), K), "");
  EXPECT_EQ(compare_bits(got, to_float(reference_f64(a)), K), "");

  // The same values in compact tensors give the same bits (SPEC §5: strides
  // never change the result).
  Tensor cgy(dtype, {M, N}), cw(dtype, {G, K, N}), cidx(kI64, {L}), cgl(kI32, {G}), cgx(kF32, {batch, K});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) cgy.set_bits(cgy.offset({i, n}), gy.t.get_bits(gy.t.offset({i, n})));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) cw.set_bits(cw.offset({g, k, n}), w.t.get_bits(w.t.offset({g, k, n})));
  for (int64_t i = 0; i < L; ++i) cidx.set_int(i, kPositions[static_cast<size_t>(i)]);
  for (int64_t g = 0; g < G; ++g) cgl.set_int(g, kCounts[static_cast<size_t>(g)]);
  cgx.fill_words(0x7FC0DEADu);
  moegrad_grad_x_args ca{&cgy.dl(), &cw.dl(), &cidx.dl(), &cgl.dl(), &cgx.dl(), batch, top_k, 0, 0};
  ASSERT_TRUE(run_grad_x(&ca, opt).ok());
  EXPECT_EQ(compare_bits(got, read_grad_x(cgx.dl()), K), "");
}

INSTANTIATE_TEST_SUITE_P(IsaDtype, Offsets64,
                         ::testing::Combine(::testing::Values(MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512),
                                            ::testing::Values(kF32, kBF16)),
                         [](const auto& info) {
                           return isa_label(std::get<0>(info.param)) + "_" +
                                  dtype_string(std::get<1>(info.param));
                         });

// Routing positions p = b * top_k + j near and beyond 2^31 - 1: the token
// b = p / top_k must come out right through int32 and int64 indices.
struct PositionsCase {
  const char* name;
  DLDataType idx_dtype;
  int64_t batch, top_k;
  std::vector<int64_t> positions;  // one per expanded row, -1 = padding
};

// gtest would otherwise print the struct's bytes, padding included.
void PrintTo(const PositionsCase& c, std::ostream* os) { *os << c.name; }

class LargePositions : public ::testing::TestWithParam<PositionsCase> {};

TEST_P(LargePositions, TokensAreExact) {
  const PositionsCase& pc = GetParam();
  const int64_t M = static_cast<int64_t>(pc.positions.size()), N = 5, K = 6, G = 2;
  Tensor gy(kF32, {M, N}), w(kF32, {G, K, N}), idx(pc.idx_dtype, {M}), gl(kI64, {G}), gx(kF32, {pc.batch, K});
  Rng rng(11);
  for (int64_t e = 0; e < gy.numel(); ++e) gy.set(e, static_cast<double>(rng.uniform(-4, 4)));
  for (int64_t e = 0; e < w.numel(); ++e) w.set(e, static_cast<double>(rng.uniform(-4, 4)));
  for (int64_t i = 0; i < M; ++i) idx.set_int(i, pc.positions[static_cast<size_t>(i)]);
  gl.set_int(0, M / 2);
  gl.set_int(1, M - M / 2);
  moegrad_grad_x_args a{&gy.dl(), &w.dl(), &idx.dl(), &gl.dl(), &gx.dl(), pc.batch, pc.top_k, 0, 0};
  for (moegrad_isa isa : available_isas()) {
    gx.fill_words(0x7FC0DEADu);  // each path writes every token itself, the ones no row reaches included
    RunOptions opt;
    opt.plan_ctx = opt.run_ctx = shared_context(isa, 2);
    const RunResult r = run_grad_x(&a, opt);
    ASSERT_TRUE(r.ok()) << r.describe();
    EXPECT_EQ(compare_bits(read_grad_x(gx.dl()), to_float(reference_f64(a)), K), "") << moegrad_isa_name(isa);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LargePositions,
    ::testing::Values(
        // slots = 2^31: INT32_MAX is the last slot of token 1.
        PositionsCase{"Int32MaxPosition", kI32, 2, int64_t{1} << 30,
                      {2147483647, 0, (int64_t{1} << 30) - 1, int64_t{1} << 30, -1, 1234567890}},
        PositionsCase{"Int32MaxPositionI64", kI64, 2, int64_t{1} << 30,
                      {2147483647, 0, (int64_t{1} << 30) - 1, int64_t{1} << 30, -1, 1234567890}},
        // slots = 3 * 2^40: positions far beyond int32.
        PositionsCase{"PositionsBeyondInt32", kI64, 3, int64_t{1} << 40,
                      {3 * (int64_t{1} << 40) - 1, int64_t{1} << 41, (int64_t{1} << 40) - 1, 0, int64_t{1} << 40, -1}},
        // slots = INT64_MAX exactly (511 * (INT64_MAX / 511)): the last slot.
        PositionsCase{"SlotsEqualInt64Max", kI64, 511, kI64Max / 511, {kI64Max - 1, 0, kI64Max / 511, -1}}),
    [](const auto& info) { return std::string(info.param.name); });

// A position equal to batch*top_k (or INT32_MAX when that is the slot count)
// is out of range, and refused before grad_x is written.
TEST(LargePositionsErrors, OutOfRangeAtTheTop) {
  struct C {
    DLDataType dt;
    int64_t batch, top_k, value;
  } cases[] = {
      {kI32, 1, 2147483647, 2147483647},       // slots = INT32_MAX: INT32_MAX is one past the end
      {kI64, 511, kI64Max / 511, kI64Max},     // slots = INT64_MAX
      {kI64, 2, int64_t{1} << 40, int64_t{1} << 41},
      {kI64, 2, 3, std::numeric_limits<int64_t>::min()},
      {kI32, 2, 3, std::numeric_limits<int32_t>::min()},
  };
  for (const C& c : cases) {
    Tensor gy(kF32, {2, 3}), w(kF32, {1, 4, 3}), idx(c.dt, {2}), gl(kI64, {1}), gx(kF32, {c.batch, 4});
    idx.set_int(0, 0);
    idx.set_int(1, c.value);
    gl.set_int(0, 2);
    gx.fill_words(0x7FC0DEADu);
    const auto before = gx.snapshot();
    moegrad_grad_x_args a{&gy.dl(), &w.dl(), &idx.dl(), &gl.dl(), &gx.dl(), c.batch, c.top_k, 0, 0};
    const RunResult r = run_grad_x(&a, {});
    EXPECT_EQ(r.status, MOEGRAD_STATUS_INDEX_OUT_OF_RANGE) << c.value << ": " << r.describe();
    EXPECT_EQ(gx.snapshot(), before) << "grad_x written by a failed call, value " << c.value;
  }
}

// SPEC §4.5: batch * top_k must not overflow int64. grad_x has the declared
// [batch, K] shape (in a sparse mapping: it must never be touched), so the
// overflow is the only violation. Planning only: the check belongs to
// validation, and running a wrongly accepted plan would zero 16 GiB.
TEST(SlotsOverflow, BatchTimesTopKOverflowIsRefused) {
  struct C {
    int64_t batch, top_k;
  } cases[] = {
      {2, int64_t{1} << 62},                 // exactly 2^63
      {3, kI64Max / 3 + 1},
      {511, kI64Max / 511 + 1},              // one step past INT64_MAX
      {2147483647, (int64_t{1} << 32) + 3},  // the largest batch: 2^63 + 2^31 - 3
      {2, kI64Max},
  };
  for (const C& c : cases) {
    const int64_t K = 2;
    SparseRegion region(static_cast<uint64_t>(c.batch) * K * 4);
    if (!region.ok()) GTEST_SKIP() << "this system refuses large MAP_NORESERVE mappings (vm.overcommit_memory=2?)";
    Tensor gx = Tensor::borrowed(region.base(), kF32, {c.batch, K}, {});
    Tensor gy(kF32, {1, 3}), w(kF32, {1, K, 3}), idx(kI64, {1}), gl(kI64, {1});
    gl.set_int(0, 1);
    moegrad_grad_x_args a{&gy.dl(), &w.dl(), &idx.dl(), &gl.dl(), &gx.dl(), c.batch, c.top_k, 0, 0};
    size_t bytes = 0;
    moegrad_executor* raw = nullptr;
    const moegrad_status s = moegrad_grad_x_get_workspace_size(&a, nullptr, &bytes, &raw);
    ExecutorPtr ex = own(raw);
    const std::string message = moegrad_last_error_message();
    EXPECT_EQ(s, MOEGRAD_STATUS_SIZE_OVERFLOW) << c.batch << " * " << c.top_k << ": " << message;
    EXPECT_EQ(raw, nullptr);
    EXPECT_NE(message.find(std::to_string(c.batch)), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(c.top_k)), std::string::npos) << message;
    // Not one page of grad_x was touched (mincore: none resident).
    std::vector<unsigned char> resident((region.bytes() + 4095) / 4096);
    ASSERT_EQ(mincore(region.base(), region.bytes(), resident.data()), 0);
    for (unsigned char page : resident) ASSERT_EQ(page & 1, 0) << "grad_x was touched";
  }
}

TEST(SlotsOverflow, ExactlyInt64MaxIsAccepted) {
  for (const int64_t batch : {int64_t{1}, int64_t{7}, int64_t{511}}) {
    const int64_t top_k = kI64Max / batch;  // 7 and 511 divide 2^63 - 1
    ASSERT_EQ(batch * top_k, kI64Max);
    Tensor gy(kF32, {1, 3}), w(kF32, {1, 2, 3}), idx(kI64, {1}), gl(kI64, {1}), gx(kF32, {batch, 2});
    for (int64_t e = 0; e < 3; ++e) gy.set(e, static_cast<double>(e + 1));
    for (int64_t e = 0; e < 6; ++e) w.set(e, static_cast<double>(e - 2));
    idx.set_int(0, kI64Max - 1);  // the last slot but one: token batch - 1, the others get no row
    gl.set_int(0, 1);
    gx.fill_words(0x7FC0DEADu);
    moegrad_grad_x_args a{&gy.dl(), &w.dl(), &idx.dl(), &gl.dl(), &gx.dl(), batch, top_k, 0, 0};
    const RunResult r = run_grad_x(&a, {});
    ASSERT_TRUE(r.ok()) << batch << ": " << r.describe();
    EXPECT_EQ(compare_bits(read_grad_x(gx.dl()), to_float(reference_f64(a)), 2), "") << batch;
  }
}

// A dimension of 2^31 or more, or strides whose byte span overflows int64,
// is SIZE_OVERFLOW - found by validation, before any memory is touched.
TEST(SizeLimits, DimensionsAndStridesThatOverflow) {
  struct C {
    const char* what;
    int tensor;  // 0 grad_y, 1 weight, 4 grad_x
    std::vector<int64_t> shape, strides;
  } cases[] = {
      {"grad_y rows 2^31", 0, {int64_t{1} << 31, 3}, {}},
      {"weight K 2^40", 1, {1, int64_t{1} << 40, 3}, {}},
      {"grad_y stride*rows > int64", 0, {4, 3}, {int64_t{1} << 62, 1}},
      {"grad_y stride bytes > int64", 0, {3, 3}, {int64_t{1} << 61, 1}},
      {"weight INT64_MIN stride", 1, {2, 2, 3}, {std::numeric_limits<int64_t>::min(), 3, 1}},
      {"grad_x stride span > int64", 4, {2, 2}, {kI64Max, 1}},
  };
  for (const C& c : cases) {
    Tensor gy(kF32, {1, 3}), w(kF32, {1, 2, 3}), idx(kI64, {1}), gl(kI64, {1}), gx(kF32, {1, 2});
    gl.set_int(0, 1);
    Tensor* target = c.tensor == 0 ? &gy : c.tensor == 1 ? &w : &gx;
    std::vector<int64_t> shape = c.shape, strides = c.strides;
    DLTensor d = target->dl();
    d.shape = shape.data();
    d.strides = strides.empty() ? nullptr : strides.data();
    moegrad_grad_x_args a{&gy.dl(), &w.dl(), &idx.dl(), &gl.dl(), &gx.dl(), 1, 1, 0, 0};
    (c.tensor == 0 ? a.grad_y : c.tensor == 1 ? a.weight : a.grad_x) = &d;
    const RunResult r = run_grad_x(&a, {});
    EXPECT_EQ(r.status, MOEGRAD_STATUS_SIZE_OVERFLOW) << c.what << ": " << r.describe();
  }
}

// A dimension of one element may have any stride, INT64_MAX and INT64_MIN
// included: it is never stepped along, so no offset overflows, and the
// result is the compact tensors' (UBSan's build catches a stride scaled to
// bytes regardless). M = batch = K = 1 make three such dimensions.
TEST(SizeLimits, AOneElementDimensionTakesAnyStride) {
  constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
  const int64_t N = 19, G = 2;
  Tensor gy(kF32, {1, N}), w(kF32, {G, 1, N}), idx(kI64, {1}), gl(kI64, {G}), gx(kF32, {1, 1});
  Rng rng(5);
  for (int64_t e = 0; e < gy.numel(); ++e) gy.set(e, static_cast<double>(rng.uniform(-4, 4)));
  for (int64_t e = 0; e < w.numel(); ++e) w.set(e, static_cast<double>(rng.uniform(-4, 4)));
  idx.set_int(0, 0);
  gl.set_int(0, 0);  // the one row is the second expert's
  gl.set_int(1, 1);
  std::vector<int64_t> gy_strides = {kI64Max, 1}, w_strides = {N, kI64Min, 1}, gx_strides = {kI64Max, -kI64Max};
  DLTensor sgy = gy.dl(), sw = w.dl(), sgx = gx.dl();
  sgy.strides = gy_strides.data();
  sw.strides = w_strides.data();
  sgx.strides = gx_strides.data();
  moegrad_grad_x_args compact{&gy.dl(), &w.dl(), &idx.dl(), &gl.dl(), &gx.dl(), 1, 1, 0, 0};
  const std::vector<float> want = reference_contract(compact);
  EXPECT_EQ(compare_bits(want, to_float(reference_f64(compact)), 1), "");
  moegrad_grad_x_args a{&sgy, &sw, &idx.dl(), &gl.dl(), &sgx, 1, 1, 0, 0};
  for (moegrad_isa isa : available_isas())
    for (const char* engine : {"packed", "rowvec"}) {
      ScopedEnv env("MOEGRAD_ENGINE", engine);
      const moegrad::Context ctx = make_context(isa, 2);
      gx.fill_words(0x7FC0DEADu);
      RunOptions opt;
      opt.plan_ctx = opt.run_ctx = ctx.get();
      const RunResult r = run_grad_x(&a, opt);
      ASSERT_TRUE(r.ok()) << moegrad_isa_name(isa) << " " << engine << ": " << r.describe();
      EXPECT_EQ(compare_bits(read_grad_x(gx.dl()), want, 1), "") << moegrad_isa_name(isa) << " " << engine;
    }
}

}  // namespace
}  // namespace mgh
