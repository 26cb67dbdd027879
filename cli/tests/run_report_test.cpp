// Which checks fail `moegrad run`: the report's verdict, field by field (the
// end-to-end tests see only runs that pass).
#include "run_report.h"

#include <gtest/gtest.h>

#include <string>

#include "json_syntax.h"

namespace moegrad::cli {
namespace {

RunReport passing_report() {
  RunReport r;
  r.bitwise_identical = true;
  r.reference.within_bound = true;
  r.have_nonfused = true;
  r.nonfused_identical = true;
  return r;
}

TEST(RunReportTest, PassesOnlyWhenEveryCheckPasses) {
  EXPECT_TRUE(passing_report().passed());
  EXPECT_EQ(passing_report().failed_check(), nullptr);
}

TEST(RunReportTest, ADifferenceFromTheNonfusedPathFails) {
  RunReport r = passing_report();
  r.nonfused_identical = false;
  r.nonfused_max_abs_diff = 0;  // -0.0 against +0.0 differs in a bit, not in value
  EXPECT_FALSE(r.passed());
  ASSERT_NE(r.failed_check(), nullptr);
  EXPECT_EQ(std::string(r.failed_check()), "grad_x differs from the non-fused path's");
}

TEST(RunReportTest, WithoutTheNonfusedPathItsComparisonIsNotACheck) {
  RunReport r = passing_report();
  r.have_nonfused = false;
  r.nonfused_identical = false;  // never computed
  EXPECT_TRUE(r.passed());
}

// Where d_expanded_x does not fit in memory, `run` skips the non-fused path
// and says why, in both renderings; the run still passes on its other checks.
TEST(RunReportTest, ASkippedNonfusedPathIsReportedWithItsReason) {
  RunReport r = passing_report();
  r.have_nonfused = false;
  r.nonfused_identical = false;  // never computed
  r.nonfused_skipped =
      "its d_expanded_x (4*M*K) and grad_x need 27.47 GiB, 19.86 GiB are available (the memory cgroup's limit less "
      "its use)";
  EXPECT_TRUE(r.passed());
  ::testing::internal::CaptureStdout();
  print_human(r);
  const std::string human = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(human.find("\n  non-fused   not run: its d_expanded_x (4*M*K) and grad_x need 27.47 GiB, "
                       "19.86 GiB are available (the memory cgroup's limit less its use)\n"),
            std::string::npos)
      << human;
  EXPECT_EQ(human.find("not available in this build"), std::string::npos) << human;
  ::testing::internal::CaptureStdout();
  print_json(r);
  const std::string json = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(cli_test::is_single_json_object(json)) << json;
  EXPECT_NE(json.find("\"nonfused_available\": false,\n  \"nonfused_skipped\": \"its d_expanded_x (4*M*K) and "
                      "grad_x need 27.47 GiB, 19.86 GiB are available (the memory cgroup's limit less its "
                      "use)\",\n"),
            std::string::npos)
      << json;
  EXPECT_EQ(json.find("nonfused_ms"), std::string::npos) << json;
}

// A build without the non-fused path says that instead, and has no reason.
TEST(RunReportTest, ABuildWithoutTheNonfusedPathSaysSo) {
  RunReport r = passing_report();
  r.have_nonfused = false;
  ::testing::internal::CaptureStdout();
  print_human(r);
  const std::string human = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(human.find("\n  non-fused   not available in this build\n"), std::string::npos) << human;
  ::testing::internal::CaptureStdout();
  print_json(r);
  const std::string json = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(cli_test::is_single_json_object(json)) << json;
  EXPECT_EQ(json.find("nonfused_skipped"), std::string::npos) << json;
}

TEST(RunReportTest, ThreadCountsAndTheReferenceBoundFailWithTheirOwnMessages) {
  RunReport threads = passing_report();
  threads.bitwise_identical = false;
  ASSERT_NE(threads.failed_check(), nullptr);
  EXPECT_EQ(std::string(threads.failed_check()), "grad_x differs between thread counts");

  RunReport bound = passing_report();
  bound.reference.within_bound = false;
  ASSERT_NE(bound.failed_check(), nullptr);
  EXPECT_EQ(std::string(bound.failed_check()), "grad_x exceeds the SPEC 5 error bound");
}

}  // namespace
}  // namespace moegrad::cli
