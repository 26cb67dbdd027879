// `moegrad bench`'s cross-check of the oneDNN baseline against the fused
// grad_x, end to end. This binary is built where the command finds
// tests/fake_onednn_module.cpp in place of the real module (its directory
// holds the module at the real one's relative path, bench/CMakeLists.txt),
// so the baseline's error is the test's to choose: agreeing, just inside
// 1e-3 * max |grad_x|, or outside it. A failed check must be a warning, FAIL
// in the table, null times in the JSON, and exit status 1, with every other
// result still printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "run_bench_captured.h"
#include "scratch_dir.h"

namespace {

using namespace moegrad::bench::test;

const char* const kShape = "64,2,4,64,32";  // M 128, K 64, N 32

// Sets the fake module's error (a fraction of max |grad_x|) for its scope.
class FakeError {
 public:
  explicit FakeError(const char* fraction) { ::setenv("MOEGRAD_TEST_FAKE_ONEDNN_ERROR", fraction, 1); }
  ~FakeError() { ::unsetenv("MOEGRAD_TEST_FAKE_ONEDNN_ERROR"); }
  FakeError(const FakeError&) = delete;
  FakeError& operator=(const FakeError&) = delete;
};

// The table's check column of each f32 oneDNN row (`path`: onednn-nonfused,
// or onednn for --op), in order.
std::vector<std::string> onednn_checks(const std::string& table, const std::string& path = "onednn-nonfused") {
  std::vector<std::string> checks;
  std::istringstream lines(table);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("f32 ", 0) != 0 || l.find(" " + path + " ") == std::string::npos) continue;
    const size_t fail = l.find(" FAIL rel "), pass = l.rfind(" rel ");
    checks.push_back(fail != std::string::npos ? l.substr(fail + 1) : pass != std::string::npos ? l.substr(pass + 1) : l);
  }
  return checks;
}

TEST(BenchCrossCheck, TheFakeModuleIsTheOneLoaded) {
  const FakeError none("0");
  const Captured c = run_bench({"--shape", kShape, "--dtype", "f32", "--threads", "1", "--reps", "1"});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("fake oneDNN (moegrad's tests)"), std::string::npos) << c.out;
}

// Float64 loops rounded to f32 agree with the fused f32 grad_x far inside
// the tolerance, and so does an element moved by half of it.
TEST(BenchCrossCheck, AgreeingBaselinesExitZero) {
  for (const char* fraction : {"0", "0.0005"}) {
    const FakeError error(fraction);
    const Captured c = run_bench({"--shape", kShape, "--dtype", "f32", "--threads", "1", "--reps", "1"});
    EXPECT_EQ(c.status, 0) << fraction << "\n" << c.err;
    EXPECT_EQ(c.err.find("warning"), std::string::npos) << fraction << "\n" << c.err;
    EXPECT_EQ(c.err.find("error"), std::string::npos) << fraction << "\n" << c.err;
    const std::vector<std::string> checks = onednn_checks(c.out);
    ASSERT_EQ(checks.size(), 1u) << c.out;
    EXPECT_EQ(checks[0].rfind("rel ", 0), 0u) << checks[0];
  }
}

// Twice the tolerance: the JSON array and --json-file are still written,
// then one error line names the check and the command exits 1.
TEST(BenchCrossCheck, AFailedCheckExitsOneAfterTheResults) {
  const moegrad::test::ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const FakeError error("0.002");
  const Captured c = run_bench({"--shape", kShape, "--dtype", "f32", "--threads", "1", "--reps", "1", "--json",
                                "--json-file", (dir.path() / "run.json").string()});
  EXPECT_EQ(c.status, 1) << c.err;
  EXPECT_NE(c.err.find("moegrad: warning: " + std::string(kShape) +
                       " f32 t=1 onednn-nonfused: grad_x differs from the fused one"),
            std::string::npos)
      << c.err;
  const std::string last =
      "moegrad: error: bench: 1 cross-check failed: " + std::string(kShape) + " f32 t=1 onednn-nonfused\n";
  ASSERT_GE(c.err.size(), last.size());
  EXPECT_EQ(c.err.substr(c.err.size() - last.size()), last) << c.err;
  // Every row is there; the failed path's times are null, so no tool
  // scoring the JSON takes them for a measurement.
  std::multiset<std::string> paths;
  for (const JsonObject* r : parse_rows(c.out)) {
    const std::string path = r->at("path").string();
    paths.insert(path);
    if (path == "fma-peak") continue;
    for (const char* k : {"ms", "ms_min", "ms_max", "gflops"}) {
      EXPECT_EQ(r->at(k).is_null(), path == "onednn-nonfused") << path << " " << k;
    }
    EXPECT_TRUE(r->at("workspace_bytes").is_number()) << path;
  }
  EXPECT_EQ(paths, (std::multiset<std::string>{"fma-peak", "fused", "nonfused", "onednn-nonfused"}));
  EXPECT_EQ(dir.read("run.json"), c.out);
}

// A baseline that leaves an element NaN (as one that never writes it would,
// over the NaN the bench fills its output with) fails like any other.
TEST(BenchCrossCheck, ANanInTheBaselineFails) {
  const FakeError error("nan");
  const Captured c = run_bench({"--shape", kShape, "--dtype", "f32", "--threads", "1", "--reps", "1"});
  EXPECT_EQ(c.status, 1) << c.err;
  EXPECT_NE(c.err.find("onednn-nonfused: grad_x differs from the fused one: max |diff| = inf"), std::string::npos)
      << c.err;
  const std::vector<std::string> checks = onednn_checks(c.out);
  ASSERT_EQ(checks.size(), 1u) << c.out;
  EXPECT_EQ(checks[0], "FAIL rel inf");
}

// Every failed check is counted, one per shape, and the table marks each
// row.
TEST(BenchCrossCheck, EachFailedCheckIsNamed) {
  const FakeError error("0.002");
  const char* const other = "32,2,4,48,16";
  const Captured c = run_bench({"--shape", kShape, "--shape", other, "--dtype", "f32", "--threads", "1", "--reps", "1"});
  EXPECT_EQ(c.status, 1) << c.err;
  const std::vector<std::string> checks = onednn_checks(c.out);
  ASSERT_EQ(checks.size(), 2u) << c.out;
  for (const std::string& check : checks) EXPECT_EQ(check.rfind("FAIL rel ", 0), 0u) << check;
  EXPECT_NE(c.err.find("moegrad: error: bench: 2 cross-checks failed: " + std::string(kShape) +
                       " f32 t=1 onednn-nonfused, " + other + " f32 t=1 onednn-nonfused\n"),
            std::string::npos)
      << c.err;
}

// --op: the fake module's float64 loops are an independent reference for
// moegrad's layer operators. Their f32 outputs must sit far inside the
// bench's tolerance of it (a sum of at most 128 products in [-1, 1] is
// rounded about once per term: ~1e-7 of max |output|), on a shape with
// every expert used and on one with empty experts (M 4, G 8).
TEST(BenchCrossCheck, LayerOperatorsAgreeWithFloat64Loops) {
  const FakeError none("0");
  for (const char* op : {"forward", "weight-grad"}) {
    for (const char* shape : {kShape, "4,1,8,16,24"}) {
      const Captured c =
          run_bench({"--op", op, "--shape", shape, "--dtype", "f32", "--threads", "1", "--reps", "1"});
      ASSERT_EQ(c.status, 0) << op << " " << shape << "\n" << c.err;
      EXPECT_NE(c.out.find("note: onednn f32: fake oneDNN (moegrad's tests), implementation float64 loops"),
                std::string::npos)
          << c.out;
      const std::vector<std::string> checks = onednn_checks(c.out, "onednn");
      ASSERT_EQ(checks.size(), 1u) << c.out;
      double rel = 1;
      ASSERT_EQ(std::sscanf(checks[0].c_str(), "rel %lf", &rel), 1) << checks[0];
      EXPECT_LT(rel, 1e-5) << op << " " << shape;
    }
  }
}

// A layer operator's baseline outside the tolerance fails as grad-x's do:
// a warning naming the output, FAIL, null times in the JSON, exit 1 last.
TEST(BenchCrossCheck, ALayerOperatorsFailedCheckExitsOne) {
  const FakeError error("0.002");
  for (const auto& [op, output] : {std::pair<std::string, std::string>{"forward", "y"}, {"weight-grad", "grad_weight"}}) {
    const Captured c =
        run_bench({"--op", op, "--shape", kShape, "--dtype", "f32", "--threads", "1", "--reps", "1", "--json"});
    EXPECT_EQ(c.status, 1) << c.err;
    const std::string tag = std::string(kShape) + " " + op + " f32 t=1 onednn";
    EXPECT_NE(c.err.find("moegrad: warning: " + tag + ": " + output + " differs from moegrad's: max |diff| = "),
              std::string::npos)
        << c.err;
    const std::string last = "moegrad: error: bench: 1 cross-check failed: " + tag + "\n";
    ASSERT_GE(c.err.size(), last.size());
    EXPECT_EQ(c.err.substr(c.err.size() - last.size()), last) << c.err;
    for (const JsonObject* r : parse_rows(c.out, /*layer_op=*/true)) {
      const std::string path = r->at("path").string();
      if (path == "fma-peak") continue;
      EXPECT_EQ(r->at("ms").is_null(), path == "onednn") << op << " " << path;
    }
  }
}

}  // namespace
