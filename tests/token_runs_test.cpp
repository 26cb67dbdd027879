// driver::find_token_runs on hand-made routing tables, each expected run
// worked out here: an expert's rows with tokens are a run when they are
// contiguous and their tokens do not decrease; padding (-1) before or
// after them is left out of it; anything else is marked for a scan (-1, -1).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "driver/routing_table.h"

namespace {

struct Expert {
  std::string what;
  std::vector<int32_t> tokens;  // token_of_row over the expert's rows
  int64_t first, end;           // the run, relative to the expert's first row; -1, -1: scanned
};

TEST(TokenRuns, EachExpertIsARunOrScanned) {
  const std::vector<Expert> experts = {
      {"ascending", {0, 2, 5, 9}, 0, 4},
      {"equal tokens side by side", {3, 3, 4, 4, 4}, 0, 5},
      {"padding before and after", {-1, -1, 1, 6, 7, -1}, 2, 5},
      {"padding inside", {1, -1, 6}, -1, -1},
      {"descending", {7, 4, 2}, -1, -1},
      {"one step down", {1, 2, 8, 5, 9}, -1, -1},
      {"no rows", {}, 0, 0},
      {"padding only", {-1, -1}, 2, 2},
      {"one row", {4}, 0, 1},
  };
  std::vector<int64_t> group_start = {0};
  std::vector<int32_t> token_of_row;
  for (const Expert& e : experts) {
    token_of_row.insert(token_of_row.end(), e.tokens.begin(), e.tokens.end());
    group_start.push_back(static_cast<int64_t>(token_of_row.size()));
  }
  const auto G = static_cast<int64_t>(experts.size());
  std::vector<int64_t> runs(2 * experts.size(), 12345);
  moegrad::driver::find_token_runs(group_start.data(), G, token_of_row.data(), runs.data());
  for (int64_t g = 0; g < G; ++g) {
    const Expert& e = experts[static_cast<size_t>(g)];
    const int64_t base = e.first < 0 ? 0 : group_start[static_cast<size_t>(g)];
    EXPECT_EQ(runs[static_cast<size_t>(2 * g)], base + e.first) << e.what;
    EXPECT_EQ(runs[static_cast<size_t>(2 * g + 1)], base + e.end) << e.what;
  }
}

}  // namespace
