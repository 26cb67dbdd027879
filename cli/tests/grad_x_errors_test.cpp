// Every kind of bad input to grad-x: non-zero status (2 usage, 1 data), one
// "moegrad: error:" line naming the problem, and no output or temp file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "grad_x_fixture.h"
#include "npy_bytes.h"

namespace moegrad::cli_test {
namespace {

class GradXErrorTest : public GradXTest {
 protected:
  void SetUp() override {
    GradXTest::SetUp();
    write_problem(p_, e_);
  }

  // The valid command line with `flag`'s value replaced (or the flag removed
  // when `value` is empty).
  std::vector<std::string> with(const std::string& flag, const std::string& value) const {
    std::vector<std::string> a = args(p_, e_);
    auto it = std::find(a.begin(), a.end(), flag);
    if (value.empty()) {
      a.erase(it, it + 2);
    } else {
      *(it + 1) = value;
    }
    return a;
  }

  std::vector<std::string> plus(std::initializer_list<std::string> extra) const {
    std::vector<std::string> a = args(p_, e_);
    a.insert(a.end(), extra);
    return a;
  }

  const MoeProblem p_ = make_problem(6, 2, 4, 5, 7, 1);
  const Encoding e_;
};

constexpr int kUsage = 2;
constexpr int kData = 1;

TEST_F(GradXErrorTest, UsageErrors) {
  expect_error(with("--out", ""), kUsage, "missing required flag --out");
  expect_error(with("--grad-y", ""), kUsage, "missing required flag --grad-y");
  expect_error(with("--batch", ""), kUsage, "missing required flag --batch");
  expect_error(plus({"--frobnicate", "1"}), kUsage, "unknown flag '--frobnicate'");
  expect_error(plus({"stray"}), kUsage, "unexpected argument 'stray'");
  expect_error(with("--batch", "12x"), kUsage, "--batch '12x' is not a decimal integer");
  expect_error(with("--batch", "1.5"), kUsage, "not a decimal integer");
  expect_error(with("--batch", "+6"), kUsage, "not a decimal integer");
  expect_error(with("--batch", "0"), kUsage, "--batch '0' is out of range");
  expect_error(with("--top-k", "99999999999999999999"), kUsage, "is out of range");
  expect_error(with("--row-idx-type", "2"), kUsage, "--row-idx-type '2' is out of range");
  expect_error(with("--group-list-type", "prefix"), kUsage, "not one of count, cumsum");
  expect_error(plus({"--threads", "0"}), kUsage, "--threads '0' is out of range");
  expect_error(plus({"--threads", "4097"}), kUsage, "--threads '4097' is out of range (expected 1 to 4096)");
  expect_error(with("--batch", "2147483648"), kUsage, "--batch '2147483648' is out of range");
  expect_error(plus({"--threads"}), kUsage, "--threads needs a value");
  expect_error(plus({"--bf16=1"}), kUsage, "--bf16 takes no value");
  expect_error(plus({"--batch", "6"}), kUsage, "--batch given twice");
  // A flag's value, even "-h", is that value, not a request for help (which
  // would exit 0 having written nothing): `--out -h` names a file.
  expect_error(with("--batch", "-h"), kUsage, "--batch '-h' is not a decimal integer");
  expect_error(with("--grad-y", "-h"), kData, "-h");
}

TEST_F(GradXErrorTest, MissingAndNonNpyFiles) {
  expect_error(with("--weight", path("nope.npy")), kData,
               "--weight: " + path("nope.npy") + ": cannot open: No such file");
  write_file("text.npy", "grad_y,1,2,3\n");
  expect_error(with("--grad-y", path("text.npy")), kData, "not a .npy file");
  write_file("empty.npy", "");
  expect_error(with("--grad-y", path("empty.npy")), kData, "not a .npy file");
  expect_error(with("--grad-y", dir().string()), kData, "not a regular file");
}

TEST_F(GradXErrorTest, MalformedNpy) {
  const std::string gy = read_file("gy.npy");
  struct Case {
    std::string bytes, needle;
  };
  const std::string data = elem_bytes(Elem::kF32, p_.grad_y);
  const std::vector<int64_t> shape{p_.m(), p_.n};
  const std::string dims = shape_tuple({p_.m(), 7});  // N = 7
  const std::string need = std::to_string(p_.m() * 7 * 4);
  const std::string have = std::to_string(p_.m() * 7 * 4 - 3);
  const std::vector<Case> cases = {
      {gy.substr(0, gy.size() - 3), "truncated: shape " + dims + " of <f4 needs " + need +
                                        " bytes of data, the file has " + have},
      {gy.substr(0, 7), "truncated"},
      {gy.substr(0, 40), "truncated: the header says"},
      {gy + "junk", "4 unexpected bytes after the data"},
      {npy_file(numpy_dict(">f4", shape), data), "big-endian dtype '>f4' is not supported"},
      {npy_file(numpy_dict("<f8", shape), data), "unsupported dtype '<f8'; expected <f4 or <f2 (or <u2 with --bf16)"},
      // Bytes from the file are quoted escaped: a control byte would break
      // the line, a byte >= 0x80 the UTF-8 a caller decodes stderr as.
      {npy_file(numpy_dict("<i\x01", shape), data), "unsupported dtype '<i\\x01'"},
      {npy_file(numpy_dict("<i\x8a", shape), data), "unsupported dtype '<i\\x8a'"},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + dims + ", '\xc3\xa9\xff': 1}", data),
       "unexpected key '\\xc3\\xa9\\xff'"},
      {npy_file(numpy_dict("<f4", shape), data, 4), "unsupported .npy format version 4.0"},
      {npy_file("{'descr': '<f4', 'fortran_order': False}", data), "no 'shape' key"},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + dims + ", 'extra': 1}",
                data),
       "unexpected key 'extra'"},
      {npy_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': " + dims + "}",
                data),
       "appears twice"},
      {npy_file("{'descr': '<f4', 'fortran_order': 0, 'shape': " + dims + "}", data),
       "fortran_order must be True or False"},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (15, -7)}", data),
       "bad header at byte"},
      {npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (15,)}", data),
       "structured"},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8)}",
                data),
       "is too large: 4-byte elements times its nonzero dimensions exceed 2^63-1 bytes"},
      // numpy refuses these whatever the place of the zero ("array is too
      // big"): the nonzero dimensions alone are 2^64 elements.
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296)}", ""),
       "is too large"},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 0)}", ""),
       "is too large"},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", data),
       "dimension too large"},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (015, 7)}", data),
       "a dimension with a leading zero is not a Python integer"},
      // A v2 header whose length field claims 16 MiB.
      {std::string("\x93NUMPY\x02\x00\x00\x00\x00\x01", 12) + std::string(64, ' '),
       "header of 16777216 bytes is too long"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    write_file("bad.npy", c.bytes);
    expect_error(with("--grad-y", path("bad.npy")), kData, "--grad-y: " + path("bad.npy") + ": ");
    expect_error(with("--grad-y", path("bad.npy")), kData, c.needle);
    std::filesystem::remove(dir() / "bad.npy");
  }
}

TEST_F(GradXErrorTest, DtypeRules) {
  // f32 grad_y, f16 weight: the library's DTYPE_MISMATCH.
  write_file("w16.npy", npy_file(numpy_dict("<f2", {p_.experts, p_.k, p_.n}),
                                 elem_bytes(Elem::kF16, p_.weight)));
  expect_error(with("--weight", path("w16.npy")), kData, "grad_y is float32 but weight is float16");
  expect_error(with("--weight", path("w16.npy")), kData, "(MOEGRAD_STATUS_DTYPE_MISMATCH)");
  // <u2 needs --bf16, and --bf16 needs <u2.
  write_file("wbf.npy", npy_file(numpy_dict("<u2", {p_.experts, p_.k, p_.n}),
                                 elem_bytes(Elem::kBF16, p_.weight)));
  expect_error(with("--weight", path("wbf.npy")), kData,
               "if it holds raw bfloat16 bits, pass --bf16");
  expect_error(
      plus({"--bf16"}), kData,
      "--grad-y: " + path("gy.npy") + " holds <f4; expected <u2 (raw bfloat16 bits, as --bf16 says)");
  // Indices must be integers, values must be floats.
  write_file("idxf.npy", npy_array("<f4", {3}, std::vector<float>{0, 1, 2}));
  expect_error(with("--row-idx", path("idxf.npy")), kData, "holds <f4; expected <i8 or <i4");
  write_file("gyi.npy", npy_array("<i4", {p_.m(), p_.n},
                                  std::vector<int32_t>(p_.grad_y.begin(), p_.grad_y.end())));
  expect_error(with("--grad-y", path("gyi.npy")), kData, "holds <i4; expected <f4 or <f2");
  // A dtype the loader reads for no input is refused with what that input
  // takes, not with every dtype some input takes.
  write_file("idx8.npy", npy_file(numpy_dict("<f8", {3}), raw_bytes(std::vector<double>{0, 1, 2})));
  expect_error(with("--row-idx", path("idx8.npy")), kData,
               "--row-idx: " + path("idx8.npy") + ": unsupported dtype '<f8'; expected <i8 or <i4");
  expect_error(with("--group-list", path("idx8.npy")), kData, "unsupported dtype '<f8'; expected <i8 or <i4");
  write_file("gy8.npy", npy_file(numpy_dict("<f8", {p_.m(), p_.n}),
                                 raw_bytes(std::vector<double>(p_.grad_y.begin(), p_.grad_y.end()))));
  expect_error(with("--grad-y", path("gy8.npy")), kData, "unsupported dtype '<f8'; expected <f4 or <f2 (or <u2 with --bf16)");
  // With --bf16 only <u2 is taken, and the refusal says so.
  std::vector<std::string> bf16_args = with("--grad-y", path("gy8.npy"));
  bf16_args.push_back("--bf16");
  expect_error(bf16_args, kData, "unsupported dtype '<f8'; expected <u2 (raw bfloat16 bits, as --bf16 says)");
}

TEST_F(GradXErrorTest, ShapeAndContentRules) {
  // N differs between grad_y and weight.
  write_file("w8.npy",
             npy_file(numpy_dict("<f4", {p_.experts, p_.k, p_.n + 1}),
                      raw_bytes(std::vector<float>(p_.experts * p_.k * (p_.n + 1), 1.0f))));
  expect_error(with("--weight", path("w8.npy")), kData, "grad_y.shape[1]=7 != weight.shape[2]=8");
  // The library's words name tensors; the message then says which flag and file each is.
  expect_error(with("--weight", path("w8.npy")), kData,
               "; grad_y is --grad-y " + path("gy.npy") + "; weight is --weight " + path("w8.npy") + " (MOEGRAD_STATUS_N_MISMATCH)");
  write_file("w2d.npy", npy_array("<f4", {p_.k, p_.n}, std::vector<float>(p_.k * p_.n, 1.0f)));
  expect_error(with("--weight", path("w2d.npy")), kData,
               "has shape (5, 7); expected 3 dimensions [G, K, N] (MOEGRAD_STATUS_BAD_RANK)");
  // An empty weight whose K makes grad_x larger than 64-bit sizes: K = 2^58
  // (numpy's limit: 4 * 2^58 * 7 bytes stays below 2^63) and --batch 16,
  // 16 * 2^58 * 4 = 2^64 bytes.
  write_file("wk58.npy", npy_file(numpy_dict("<f4", {0, int64_t{1} << 58, p_.n}), ""));
  std::vector<std::string> wide = with("--weight", path("wk58.npy"));
  *(std::find(wide.begin(), wide.end(), "--batch") + 1) = "16";
  expect_error(wide, kData, "grad_x [16, 288230376151711744] overflows 64-bit size (MOEGRAD_STATUS_SIZE_OVERFLOW)");
  // A 0-d index array is read fine; the library names the rank rule.
  write_file("idx0d.npy", npy_file(numpy_dict("<i8", {}), raw_bytes(std::vector<int64_t>{3})));
  expect_error(with("--row-idx", path("idx0d.npy")), kData, "MOEGRAD_STATUS_BAD_RANK");
  // An index value outside [0, batch*top_k).
  std::vector<int64_t> idx = p_.row_idx_type0();
  idx[2] = p_.batch * p_.top_k;
  write_file("idx_bad.npy", index_npy(Index::kI64, idx));
  expect_error(with("--row-idx", path("idx_bad.npy")), kData, "expanded_row_idx[2]=12");
  expect_error(with("--row-idx", path("idx_bad.npy")), kData, "; expanded_row_idx is --row-idx " + path("idx_bad.npy"));
  expect_error(with("--row-idx", path("idx_bad.npy")), kData, "MOEGRAD_STATUS_INDEX_OUT_OF_RANGE");
  // Group counts that do not sum to M.
  std::vector<int64_t> counts = p_.counts;
  counts[0] += 1;
  write_file("gl_bad.npy", index_npy(Index::kI64, counts));
  expect_error(with("--group-list", path("gl_bad.npy")), kData,
               "MOEGRAD_STATUS_GROUP_SUM_MISMATCH");
  expect_error(with("--group-list", path("gl_bad.npy")), kData, "; group_list is --group-list " + path("gl_bad.npy"));
  // Counts that fall short of M: found only after the last group, and still
  // named as the --group-list file.
  std::vector<int64_t> short_counts = p_.counts;
  *std::find_if(short_counts.begin(), short_counts.end(), [](int64_t c) { return c > 0; }) -= 1;
  write_file("gl_short.npy", index_npy(Index::kI64, short_counts));
  expect_error(with("--group-list", path("gl_short.npy")), kData, "MOEGRAD_STATUS_GROUP_SUM_MISMATCH");
  expect_error(with("--group-list", path("gl_short.npy")), kData,
               "; group_list is --group-list " + path("gl_short.npy"));
  // grad_y rows exceed the slots.
  expect_error(with("--batch", "1"), kData, "MOEGRAD_STATUS_M_EXCEEDS_SLOTS");
}

// An output too large for memory names its shape and where the shape comes
// from, so a mistyped --batch is recognisable (2 GiB of address space here).
TEST_F(GradXErrorTest, AnOutputTooLargeForMemoryNamesItsShape) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory needs more address space than the cap leaves";
#endif
  RunOptions capped;
  capped.address_space_bytes = 2ull << 30;
  // 2000000000 * 5 * 4 bytes.
  expect_error(with("--batch", "2000000000"), kData,
               "out of memory: cannot allocate 40000000000 bytes for grad_x [2000000000, 5] "
               "(--batch by the weight's K)",
               capped);
}

// The library checks the shapes before grad_x is given memory: an N that
// does not match, with a --batch whose grad_x (40 GiB) the command may not
// have (1 GiB of data here), is reported as the mismatch, not as "out of
// memory" for grad_x; with the shapes right, grad_x's memory is refused as
// such: as more than the memory available where that is under 40 GiB,
// else as an allocation beyond the cap. Nothing is left beside the output
// either way.
TEST_F(GradXErrorTest, AShapeErrorIsReportedBeforeGradXIsGivenMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory needs more data than the cap leaves";
#endif
  const RunOptions capped{.data_bytes = 1ull << 30};
  const std::vector<float> ones(static_cast<std::size_t>(p_.m() * (p_.n - 1)), 1.0f);
  write_file("gy_n4.npy", npy_file(numpy_dict("<f4", {p_.m(), p_.n - 1}), raw_bytes(ones)));
  const std::set<std::string> before = listing();
  std::vector<std::string> a = with("--grad-y", path("gy_n4.npy"));
  *(std::find(a.begin(), a.end(), "--batch") + 1) = "2147483647";
  expect_error(a, kData, "MOEGRAD_STATUS_N_MISMATCH", capped);
  EXPECT_EQ(listing(), before);
  expect_error(with("--batch", "2147483647"), kData, "grad_x [2147483647, 5] (--batch by the weight's K)", capped);
  EXPECT_EQ(listing(), before);
}

// A grad_x (and workspace) beyond the memory available is refused before
// it is touched: Linux overcommits, so backing it could succeed and filling
// it get the process killed with no message and its temporary output left
// behind. grad_x here is twice the memory available, under a cap of 1 GiB
// of data, so that a command without the check fails on its allocation
// instead (as it would where the machine has less RAM than grad_x).
TEST_F(GradXErrorTest, AnOutputBeyondTheMemoryAvailableIsRefusedBeforeItIsTouched) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory needs more data than the cap leaves";
#endif
  const std::optional<uint64_t> available = mem_available_bytes();
  if (!available) GTEST_SKIP() << "neither MemAvailable nor a cgroup's headroom can be read";
  // A weight of K = 64 columns (zeros; N and G as the fixture's): a row of
  // grad_x is 256 bytes, so 2^31 - 1 rows reach 512 GiB.
  constexpr int64_t kWideK = 64;
  const std::vector<float> zeros(static_cast<std::size_t>(p_.experts * kWideK * p_.n), 0.0f);
  write_file("w_k64.npy", npy_file(numpy_dict("<f4", {p_.experts, kWideK, p_.n}), raw_bytes(zeros)));
  const uint64_t rows = std::min<uint64_t>(2 * *available / (kWideK * sizeof(float)) + 1, INT32_MAX);
  if (rows * kWideK * sizeof(float) <= *available) GTEST_SKIP() << "more memory available than 2^31 - 1 rows need";
  std::vector<std::string> a = with("--weight", path("w_k64.npy"));
  *(std::find(a.begin(), a.end(), "--batch") + 1) = std::to_string(rows);
  expect_error(a, kData,
               "grad-x: grad_x [" + std::to_string(rows) + ", 64] (--batch by the weight's K) and the workspace need ",
               RunOptions{.data_bytes = 1ull << 30});
}

// Corrupting header bytes one at a time must give a clean result or a clean
// error, never a crash: the reader trusts nothing in the file.
TEST_F(GradXErrorTest, CorruptHeadersNeverCrash) {
  const std::string gy = read_file("gy.npy");
  const std::size_t data_offset = gy.size() - static_cast<std::size_t>(p_.m() * p_.n * 4);
  uint64_t state = 12345;
  for (int trial = 0; trial < 60; ++trial) {
    std::string bad = gy;
    for (int flips = 0; flips < 1 + trial % 3; ++flips) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const std::size_t at = (state >> 33) % data_offset;
      bad[at] = static_cast<char>(bad[at] ^ (1 << ((state >> 20) % 8)));
    }
    write_file("bad.npy", bad);
    const std::set<std::string> before = listing();
    const RunResult r = run_moegrad(with("--grad-y", path("bad.npy")));
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << "trial " << trial << ": " << r.exit_code;
    if (r.exit_code == 1) {
      EXPECT_TRUE(r.err.starts_with("moegrad: error: ")) << r.err;
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
      EXPECT_EQ(listing(), before);
    }
    std::filesystem::remove(dir() / "dx.npy");
  }
}

TEST_F(GradXErrorTest, UnwritableOutput) {
  expect_error(with("--out", path("no/such/dir/dx.npy")), kData, "cannot create a file in");
  expect_error(with("--out", dir().string()), kData, "is a directory");
}

TEST_F(GradXErrorTest, FailureKeepsAnExistingOutput) {
  write_file("dx.npy", "previous result");
  expect_error(with("--batch", "1"), kData, "MOEGRAD_STATUS_M_EXCEEDS_SLOTS");
  EXPECT_EQ(read_file("dx.npy"), "previous result");
}

}  // namespace
}  // namespace moegrad::cli_test
