// SPEC §6: every workspace region is 512-byte aligned. The plan places the
// regions at offsets from an aligned base (checked here for each ISA,
// engine, worker count and shape, with the regions disjoint and inside the
// size it reports), and a run puts that base on the first 512-byte boundary
// of the caller's pointer (checked by what a run writes into a workspace
// given at several misalignments).
#include <moegrad/moegrad.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plan/grad_x_plan.h"
#include "problem.h"
#include "runner.h"

namespace {

using moegrad::plan::Region;

struct Shape {
  const char* name;
  int64_t batch, top_k, G, K, N;
  moegrad::DType dtype;
};

constexpr Shape kShapes[] = {
    {"one row", 1, 1, 1, 1, 1, moegrad::DType::kF32},
    {"fine-grained-like", 1024, 8, 128, 2048, 768, moegrad::DType::kF32},
    {"zmoe-like", 2048, 4, 60, 7168, 2048, moegrad::DType::kBF16},
    {"large-token-like", 110592, 2, 60, 128, 256, moegrad::DType::kF16},
    {"odd", 37, 3, 7, 75, 260, moegrad::DType::kF32},
};

moegrad::GradXProblem problem_of(const Shape& s) {
  moegrad::GradXProblem p;
  p.dtype = s.dtype;
  p.batch = s.batch;
  p.top_k = s.top_k;
  p.M = s.batch * s.top_k;
  p.G = s.G;
  p.K = s.K;
  p.N = s.N;
  p.gy_row = s.N;
  p.gy_col = 1;
  p.w_g = s.K * s.N;
  p.w_k = s.N;
  p.w_n = 1;
  p.gx_row = s.K;
  p.gx_col = 1;
  p.row_idx.length = p.M;
  p.group_list.length = s.G;
  return p;
}

TEST(WorkspaceLayout, EveryRegionIs512ByteAlignedDisjointAndInside) {
  using moegrad::plan::Engine;
  using moegrad::plan::RegionsFor;
  for (const Shape& s : kShapes) {
    const moegrad::GradXProblem p = problem_of(s);
    for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
      const moegrad::kernels::GemmKernels* k = moegrad::kernels::gemm_kernels_for(isa);
      if (k == nullptr) continue;
      for (const Engine engine : {Engine::kPacked, Engine::kRowvec, Engine::kAuto}) {
        for (const int workers : {1, 2, 3, 8}) {
          for (const RegionsFor regions : {RegionsFor::kFusedItems, RegionsFor::kEveryWorker}) {
            moegrad::plan::GradXPlan plan;
            ASSERT_EQ(moegrad::plan::make_grad_x_plan(p, *k, workers, engine, {}, regions, &plan),
                      MOEGRAD_STATUS_SUCCESS);
            const std::string what = std::string(s.name) + " isa " + std::to_string(isa) + " engine " +
                                     std::to_string(static_cast<int>(engine)) + " workers " + std::to_string(workers);
            const Region all[] = {plan.token_of_row, plan.row_starts, plan.token_has_rows,
                                  plan.group_start,  plan.token_runs, plan.ring,
                                  plan.a_pack,       plan.b_pack,     plan.row_lists};
            std::vector<std::pair<size_t, size_t>> spans;  // [offset, end) of each non-empty region
            for (const Region& r : all) {
              EXPECT_EQ(r.offset % 512, 0u) << what;
              EXPECT_EQ(r.per_worker % 512, 0u) << what;
              if (r.bytes > 0) spans.emplace_back(r.offset, r.offset + r.bytes);
            }
            std::sort(spans.begin(), spans.end());
            for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first) << what;
            // The reported size leaves 511 bytes to align any pointer.
            ASSERT_FALSE(spans.empty()) << what;
            EXPECT_LE(spans.back().second + 511, plan.workspace_bytes) << what;
          }
        }
      }
    }
  }
}

// A run writes nothing below the first 512-byte boundary at or past the
// workspace pointer, and writes the first region from there on: the lowest
// byte that differs from the fill, whichever of two fills, is on that
// boundary.
TEST(WorkspaceLayout, ARunPlacesItsRegionsFromTheFirst512ByteBoundary) {
  const mgt::Problem p(mgt::make_spec({.batch = 40, .top_k = 3, .experts = 5, .K = 70, .N = 260}, 0, 1.0, 3));
  for (moegrad_isa isa : mgt::explicit_isas()) {
    if (!moegrad_isa_available(isa)) continue;
    const mgt::ContextPtr ctx = mgt::make_context(isa, 2);
    for (const size_t misalign : {0u, 1u, 64u, 448u, 511u}) {
      size_t lowest_changed = SIZE_MAX;
      size_t offset_to_boundary = 0;
      for (const unsigned char fill : {0xA5, 0x5A}) {
        mgt::HostTensor gx = p.make_grad_x();
        mgt::Call call(p, gx);
        size_t bytes = 0;
        moegrad_executor* raw = nullptr;
        ASSERT_EQ(moegrad_grad_x_get_workspace_size(&call.args, ctx.get(), &bytes, &raw), MOEGRAD_STATUS_SUCCESS);
        const mgt::ExecutorPtr executor(raw);
        std::vector<unsigned char> buffer(bytes + 1024, fill);
        const auto start = reinterpret_cast<uintptr_t>(buffer.data());
        unsigned char* ws = buffer.data() + ((512 - start % 512) % 512 + misalign);
        ASSERT_EQ(moegrad_grad_x(ws, bytes, executor.get(), ctx.get()), MOEGRAD_STATUS_SUCCESS);
        offset_to_boundary = (512 - reinterpret_cast<uintptr_t>(ws) % 512) % 512;
        for (size_t i = 0; i < bytes; ++i) {
          if (ws[i] != fill) {
            lowest_changed = std::min(lowest_changed, i);
            break;
          }
        }
      }
      EXPECT_EQ(lowest_changed, offset_to_boundary) << "isa " << isa << " workspace 512-aligned + " << misalign;
    }
  }
}

}  // namespace
