// Which checks fail `moegrad run`: the report's verdict, field by field (the
// end-to-end tests see only runs that pass).
#include "run_report.h"

#include <gtest/gtest.h>

#include <string>

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
