// Software prefetch spread over the micro-kernel calls of a tile. The data a
// tile will need next — the next reduction block of the weights, the gathered
// grad_y rows of the next slot, the grad_x rows it will add into — is
// scattered (one row per token) or streamed from DRAM, which the hardware
// prefetchers do not foresee. Issuing all lines at once would stall on the
// miss buffers, so each micro-kernel call issues only its share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace moegrad::driver {

// rows x row_bytes of memory: row r starts at base + index(r) * row_step bytes,
// index(r) = row_index ? row_index[r] : r.
struct PrefetchRegion {
  const void* base = nullptr;
  int64_t row_step = 0;
  const int32_t* row_index = nullptr;
  size_t rows = 0;
  size_t row_bytes = 0;
  bool for_write = false;
};

class Prefetcher {
 public:
  static constexpr int kMaxRegions = 4;

  void add(const PrefetchRegion& r) {
    if (count_ < kMaxRegions && r.rows > 0 && r.row_bytes > 0) {
      regions_[count_++] = r;
      total_lines_ += r.rows * lines_per_row(r);
    }
  }

  // Spread everything added so far over `calls` calls of step().
  void spread_over(size_t calls) { per_call_ = (total_lines_ + calls - 1) / std::max<size_t>(calls, 1); }

  void step() {
    for (size_t n = 0; n < per_call_ && region_ < count_; ++n) {
      const PrefetchRegion& r = regions_[region_];
      const int64_t index = r.row_index != nullptr ? r.row_index[row_] : static_cast<int64_t>(row_);
      const char* p = static_cast<const char*>(r.base) + index * r.row_step + static_cast<int64_t>(line_ * 64);
      if (r.for_write) {
        __builtin_prefetch(p, 1, 2);
      } else {
        __builtin_prefetch(p, 0, 2);
      }
      if (++line_ == lines_per_row(r)) {
        line_ = 0;
        if (++row_ == r.rows) {
          row_ = 0;
          ++region_;
        }
      }
    }
  }

 private:
  // +1: a row need not start on a cache line.
  static size_t lines_per_row(const PrefetchRegion& r) { return (r.row_bytes + 63) / 64 + 1; }

  PrefetchRegion regions_[kMaxRegions];
  int count_ = 0;
  size_t total_lines_ = 0, per_call_ = 0;
  int region_ = 0;
  size_t row_ = 0, line_ = 0;
};

}  // namespace moegrad::driver
