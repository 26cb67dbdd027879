// How the scatter-adds share grad_x's columns among threads and how far
// ahead they request grad_x rows. moegrad's own non-fused path
// (grad_x_driver.cpp) and the oneDNN baseline of `moegrad bench`
// (bench/onednn_module.cpp) both use it, so the two baselines differ in
// their GEMM alone; the fused scatter-add looks ahead as far.
#pragma once

#include <algorithm>
#include <cstdint>

namespace moegrad::driver {

// How many rows ahead a scatter-add asks for the grad_x row it will add
// into (tokens come in random order, so no hardware prefetcher can).
inline constexpr int64_t kAddAhead = 8;

// Columns of one scatter-add block: about four blocks a thread, but at
// least 512 columns (2 KiB of each row: its lines stream) unless that
// leaves a thread without a block, and never under 64; a multiple of 16
// (64-byte lines, so that threads share no line where grad_x's rows start
// on one). The GEMM's column blocks are no guide: large-token's plan has
// one (K = 128), which left the second thread idle for the whole
// scatter-add. Every grad_x element still sums its rows in ascending
// order (SPEC §5): the split changes no bits.
inline int64_t scatter_add_block_width(int64_t K, int threads) {
  const int64_t t = std::max(threads, 1);
  auto lines_of = [](int64_t cols) { return (cols + 15) / 16 * 16; };
  const int64_t four_a_thread = lines_of((K + 4 * t - 1) / (4 * t));
  const int64_t one_a_thread = lines_of((K + t - 1) / t);
  return std::max({four_a_thread, std::min<int64_t>(one_a_thread, 512), int64_t{64}});
}

}  // namespace moegrad::driver
