// grad-x succeeds on every supported encoding and produces exactly the
// reference values; file-format variants and thread counts change nothing.
#include <gtest/gtest.h>
#include <moegrad/moegrad.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "grad_x_fixture.h"
#include "npy_bytes.h"
#include "runtime/cpu_features.h"

namespace moegrad::cli_test {
namespace {

void expect_values(const std::vector<float>& got, const std::vector<float>& want, int64_t k) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "first difference at grad_x[" << i / k << ", " << i % k << "]";
    if (got[i] != want[i]) return;
  }
}

std::vector<Encoding> all_encodings() {
  std::vector<Encoding> out;
  for (const Elem elem : {Elem::kF32, Elem::kF16, Elem::kBF16}) {
    for (const int type : {0, 1}) {
      for (const Index index : {Index::kI32, Index::kI64}) {
        for (const bool cumsum : {false, true}) out.push_back({elem, type, index, cumsum});
      }
    }
  }
  return out;
}

class GradXEncodingTest : public GradXTest, public ::testing::WithParamInterface<Encoding> {};

TEST_P(GradXEncodingTest, WritesExactReference) {
  const Encoding e = GetParam();
  const MoeProblem p = make_problem(6, 2, 4, 5, 7, 1);
  write_problem(p, e);
  const RunResult r = run_moegrad(args(p, e));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "");
  const std::vector<float> got = read_grad_x("dx.npy", p.batch, p.k);
  expect_values(got, p.expected_grad_x(), p.k);
  for (int64_t k = 0; k < p.k; ++k) {
    const float v = got[(p.batch - 1) * p.k + k];
    EXPECT_TRUE(v == 0.0f && !std::signbit(v)) << "token with no rows: " << v << " (SPEC: +0.0)";
  }
  EXPECT_EQ(listing(), (std::set<std::string>{"gy.npy", "w.npy", "idx.npy", "gl.npy", "dx.npy"}));
}

INSTANTIATE_TEST_SUITE_P(AllEncodings, GradXEncodingTest, ::testing::ValuesIn(all_encodings()),
                         [](const auto& info) { return encoding_name(info.param); });

// Small integers keep every product and sum exact, so the fast bf16 order
// gives the reference too; a CPU without AVX512_BF16 refuses it clearly.
TEST_F(GradXTest, FastBf16OnBf16Inputs) {
  const MoeProblem p = make_problem(6, 2, 4, 5, 7, 1);
  const Encoding e{Elem::kBF16, 0, Index::kI64, false};
  write_problem(p, e);
  std::vector<std::string> a = args(p, e);
  a.push_back("--fast-bf16");
  const RunResult r = run_moegrad(a);
  if (r.exit_code == 0) {
    expect_values(read_grad_x("dx.npy", p.batch, p.k), p.expected_grad_x(), p.k);
  } else {
    EXPECT_FALSE(moegrad::runtime::cpu_features().avx512bf16) << "refused on a CPU with AVX512_BF16: " << r.err;
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("AVX512_BF16"), std::string::npos) << r.err;
  }
}

// The flag reaches the library: on the AVX2 path the exact mode runs and the
// fast mode is refused (it never falls back silently).
TEST_F(GradXTest, FastBf16IsRefusedOnAvx2) {
  const MoeProblem p = make_problem(6, 2, 4, 5, 7, 1);
  const Encoding e{Elem::kBF16, 0, Index::kI64, false};
  write_problem(p, e);
  const char* saved = std::getenv("MOEGRAD_ISA");
  const std::string saved_value = saved ? saved : "";
  setenv("MOEGRAD_ISA", "avx2", 1);
  const RunResult exact = run_moegrad(args(p, e, "exact.npy"));
  std::vector<std::string> a = args(p, e, "fast.npy");
  a.push_back("--fast-bf16");
  const RunResult fast = run_moegrad(a);
  if (saved) {
    setenv("MOEGRAD_ISA", saved_value.c_str(), 1);
  } else {
    unsetenv("MOEGRAD_ISA");
  }
  if (moegrad_isa_available(MOEGRAD_ISA_AVX2) == 0) GTEST_SKIP() << "no AVX2 path here: " << exact.err;
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_EQ(fast.exit_code, 1);
  EXPECT_NE(fast.err.find("fast bf16 mode needs AVX512_BF16"), std::string::npos) << fast.err;
}

TEST_F(GradXTest, FastBf16NeedsBf16Inputs) {
  const MoeProblem p = make_problem(6, 2, 4, 5, 7, 1);
  const Encoding e;
  write_problem(p, e);
  std::vector<std::string> a = args(p, e);
  a.push_back("--fast-bf16");
  const RunResult r = run_moegrad(a);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--fast-bf16 applies to bf16 inputs only"), std::string::npos) << r.err;
  EXPECT_EQ(listing(), (std::set<std::string>{"gy.npy", "w.npy", "idx.npy", "gl.npy"}));
}

TEST_F(GradXTest, ThreadCountsGiveIdenticalBytes) {
  const MoeProblem p = make_problem(40, 3, 6, 33, 65, 7);
  const Encoding e;
  write_problem(p, e);
  std::vector<std::string> one = args(p, e, "dx1.npy");
  one.insert(one.end(), {"--threads", "1"});
  std::vector<std::string> three = args(p, e, "dx3.npy");
  three.insert(three.end(), {"--threads", "3"});
  ASSERT_EQ(run_moegrad(one).exit_code, 0);
  ASSERT_EQ(run_moegrad(three).exit_code, 0);
  EXPECT_EQ(read_file("dx1.npy"), read_file("dx3.npy"));
  expect_values(read_grad_x("dx1.npy", p.batch, p.k), p.expected_grad_x(), p.k);
}

TEST_F(GradXTest, FortranOrderWeightIsReadThroughStrides) {
  const MoeProblem p = make_problem(6, 2, 4, 5, 7, 2);
  const Encoding e;
  write_problem(p, e);
  // Column-major: element [g, k, n] at g + G*(k + K*n).
  std::vector<float> column_major(p.weight.size());
  for (int64_t g = 0; g < p.experts; ++g) {
    for (int64_t k = 0; k < p.k; ++k) {
      for (int64_t n = 0; n < p.n; ++n) {
        column_major[g + p.experts * (k + p.k * n)] =
            static_cast<float>(p.weight[(g * p.k + k) * p.n + n]);
      }
    }
  }
  write_file("w.npy", npy_file(numpy_dict("<f4", {p.experts, p.k, p.n}, /*fortran=*/true),
                               raw_bytes(column_major)));
  const RunResult r = run_moegrad(args(p, e));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_values(read_grad_x("dx.npy", p.batch, p.k), p.expected_grad_x(), p.k);
}

// Every way a valid header may be spelled, applied to grad_y.
TEST_F(GradXTest, HeaderVariantsAreAccepted) {
  const MoeProblem p = make_problem(6, 2, 4, 5, 7, 3);
  const Encoding e;
  write_problem(p, e);
  const std::string data = elem_bytes(Elem::kF32, p.grad_y);
  const std::string rows = std::to_string(p.m()), cols = std::to_string(p.n);
  struct Variant {
    const char* name;
    std::string file;
  };
  const std::vector<Variant> variants = {
      {"numpy v1", npy_file(numpy_dict("<f4", {p.m(), p.n}), data)},
      {"version 2.0", npy_file(numpy_dict("<f4", {p.m(), p.n}), data, 2)},
      {"version 3.0", npy_file(numpy_dict("<f4", {p.m(), p.n}), data, 3)},
      {"16-byte alignment", npy_file(numpy_dict("<f4", {p.m(), p.n}), data, 1, 16)},
      {"unaligned data", npy_file(numpy_dict("<f4", {p.m(), p.n}), data, 1, 1)},
      {"key order, quotes, spacing, no trailing comma",
       npy_file("{ \"shape\" : ( " + rows + " ,\t" + cols +
                    " ) ,\n \"fortran_order\":False,'descr':\"<f4\"}",
                data)},
      {"native byte order", npy_file(numpy_dict("=f4", {p.m(), p.n}), data)},
      {"not-applicable byte order", npy_file(numpy_dict("|f4", {p.m(), p.n}), data)},
      {"python 2 longs", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (" + rows +
                                      "L, " + cols + "L), }",
                                  data)},
      {"trailing comma in shape", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                                               rows + ", " + cols + ",), }",
                                           data)},
  };
  const std::vector<float> want = p.expected_grad_x();
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    write_file("gy.npy", v.file);
    const RunResult r = run_moegrad(args(p, e));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_values(read_grad_x("dx.npy", p.batch, p.k), want, p.k);
  }
}

TEST_F(GradXTest, NoRowsGivesZeros) {
  MoeProblem p = make_problem(3, 2, 3, 4, 5, 4);
  p.position_of_row.clear();
  p.expert_of_row.clear();
  p.grad_y.clear();
  p.counts.assign(3, 0);
  const Encoding e;
  write_problem(p, e);
  const RunResult r = run_moegrad(args(p, e));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_values(read_grad_x("dx.npy", p.batch, p.k), std::vector<float>(12, 0.0f), p.k);
}

TEST_F(GradXTest, ReplacesAnExistingOutput) {
  const MoeProblem p = make_problem(6, 2, 4, 5, 7, 5);
  const Encoding e;
  write_problem(p, e);
  write_file("dx.npy", "old contents");
  ASSERT_EQ(run_moegrad(args(p, e)).exit_code, 0);
  expect_values(read_grad_x("dx.npy", p.batch, p.k), p.expected_grad_x(), p.k);
}

}  // namespace
}  // namespace moegrad::cli_test
