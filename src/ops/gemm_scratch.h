// Per-worker buffers of the GEMM operators (grouped_matmul and its weight
// grad) around driver::packed_gemm_tile: the row list of a tile, the packed
// panels, and an f32 C tile for outputs the kernel cannot write directly.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "driver/packed_gemm.h"
#include "kernels/gemm_kernels.h"
#include "ops/workspace.h"

namespace moegrad::ops {

// A tile of C is ms rows x nc columns; the reduction runs in kc blocks.
struct TileBlocking {
  size_t ms = 0, nc = 0, kc = 0;
};

// `extent` split into as few blocks of at most ~`target` as possible, evened
// out and rounded up to `unit` (so the last block is not a sliver).
inline size_t balanced_block(size_t extent, size_t target, size_t unit) {
  const size_t blocks = std::max<size_t>((extent + target - 1) / target, 1);
  return round_up(std::max<size_t>((extent + blocks - 1) / blocks, 1), unit);
}

inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

struct GemmWorkerSlots {
  BookedRegion rows, a_pack, b_pack, c_tile;
  bool has_c_tile = false;
};

inline bool book_gemm_worker_slots(WorkspaceLayout* layout, const kernels::GemmKernels& k, const TileBlocking& b,
                                   int workers, bool need_c_tile, GemmWorkerSlots* s) {
  s->has_c_tile = need_c_tile;
  return layout->book(b.ms, sizeof(int32_t), workers, &s->rows) &&
         layout->book(kernels::a_pack_floats(k, b.ms, b.kc), sizeof(float), workers, &s->a_pack) &&
         layout->book(round_up(b.nc, k.nr) * b.kc, sizeof(float), workers, &s->b_pack) &&
         (!need_c_tile || layout->book(b.ms * b.nc, sizeof(float), workers, &s->c_tile));
}

struct WorkerScratch {
  int32_t* rows;
  driver::PackScratch pack;
  float* c_tile;  // nullptr when not booked
};

inline WorkerScratch worker_scratch(std::byte* base, const GemmWorkerSlots& s, int worker) {
  return WorkerScratch{s.rows.at<int32_t>(base, worker),
                       driver::PackScratch{s.a_pack.at<float>(base, worker), s.b_pack.at<float>(base, worker)},
                       s.has_c_tile ? s.c_tile.at<float>(base, worker) : nullptr};
}

}  // namespace moegrad::ops
