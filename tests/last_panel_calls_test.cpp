// Which calls an expert's last panel makes on the AVX-512 row-vector
// engine (32-row panels, a narrow kernel of up to 12 rows) under each CPU
// family's rules, set through the tuning-family hook, so the rules are
// checked on every CPU with AVX-512. Expected values from the rules as
// driver/rowvec_gemm.cpp states them: the narrow kernel only on AMD's
// families 0x19 and 0x1a, up to 12 rows behind full panels, a slot of one
// panel up to 12 rows on a Zen 3/4 and 8 on a Zen 5; 17 to 16 + that cap
// rows behind full panels split into a 16-row call and a narrow one.
#include <gtest/gtest.h>

#include <cstddef>
#include <utility>

#include "driver/rowvec_gemm.h"
#include "kernels/gemm_kernels.h"
#include "runner.h"

namespace mgt {
namespace {

struct Want {
  size_t count;                        // the expert's rows
  size_t other[2], zen34[2], zen5[2];  // {main, narrow} rows per family
};

TEST(LastPanelCalls, FollowEachFamilysRules) {
  const moegrad::kernels::GemmKernels* k = moegrad::kernels::gemm_kernels_for(MOEGRAD_ISA_AVX512);
  if (k == nullptr || k->rowvec == nullptr || k->rowvec->narrow_ukernel == nullptr)
    GTEST_SKIP() << "no AVX-512 on this CPU";
  ASSERT_EQ(k->rowvec->panel, 32u);
  ASSERT_EQ(k->rowvec->narrow_rows, 12u);
  const Want cases[] = {
      {137, {9, 0}, {0, 9}, {0, 9}},     // 4 panels + 9: narrow behind full panels
      {140, {12, 0}, {0, 12}, {0, 12}},  // + 12, the narrow kernel's most
      {141, {13, 0}, {13, 0}, {13, 0}},  // + 13: one 16-row vector
      {148, {20, 0}, {16, 4}, {16, 4}},  // + 20: 16 + narrow 4
      {152, {24, 0}, {16, 8}, {16, 8}},  // + 24: 16 + narrow 8
      {154, {26, 0}, {16, 10}, {26, 0}}, // + 26: a Zen 5 caps the narrow part at 8
      {160, {32, 0}, {32, 0}, {32, 0}},  // whole panels only
      {8, {8, 0}, {0, 8}, {0, 8}},       // one panel of 8
      {10, {10, 0}, {0, 10}, {10, 0}},   // one panel of 10: a Zen 5 keeps it to 8
      {20, {20, 0}, {20, 0}, {20, 0}},   // one panel of 20: never split
  };
  for (const Want& w : cases) {
    for (auto [family, want] : {std::pair{0, w.other}, std::pair{0x19, w.zen34}, std::pair{0x1a, w.zen5}}) {
      const ScopedTuningFamily rules(family);
      const moegrad::driver::LastPanelCalls got = moegrad::driver::last_panel_calls(*k->rowvec, w.count);
      EXPECT_EQ(got.main, want[0]) << w.count << " rows, family " << family;
      EXPECT_EQ(got.narrow, want[1]) << w.count << " rows, family " << family;
    }
  }
}

}  // namespace
}  // namespace mgt
