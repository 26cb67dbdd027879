// Workspace layout of a layer operator: regions booked at planning time
// (oneDNN's scratchpad `book`), found again at run time from one base
// pointer. Every region starts 512-byte aligned from an aligned base, and
// the total includes the slack that lets any workspace pointer be aligned.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/workspace_align.h"

namespace moegrad::ops {

inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// One booked region: `copies` slices (one per worker, or 1 if shared).
struct BookedRegion {
  size_t offset = 0;
  size_t slice = 0;  // bytes between consecutive copies

  template <typename T>
  T* at(std::byte* base, int copy = 0) const {
    return reinterpret_cast<T*>(base + offset + static_cast<size_t>(copy) * slice);
  }
};

class WorkspaceLayout {
 public:
  // Books `copies` aligned slices of `bytes` each (an element count times
  // element size, overflow-checked). False on overflow.
  bool book(size_t count, size_t elem_bytes, int copies, BookedRegion* region) {
    size_t bytes = 0, slice = 0, total = 0;
    if (__builtin_mul_overflow(count, elem_bytes, &bytes) ||
        __builtin_add_overflow(bytes, kWorkspaceAlign - 1, &slice))
      return ok_ = false;
    slice = slice / kWorkspaceAlign * kWorkspaceAlign;
    if (__builtin_mul_overflow(slice, static_cast<size_t>(copies), &total)) return ok_ = false;
    region->offset = cursor_;
    region->slice = slice;
    if (__builtin_add_overflow(cursor_, total, &cursor_)) return ok_ = false;
    return ok_;
  }

  // Bytes a caller must provide (0 when nothing was booked); false on overflow.
  bool total(size_t* bytes) const {
    if (!ok_) return false;
    *bytes = 0;
    return cursor_ == 0 || !__builtin_add_overflow(cursor_, kWorkspaceAlign - 1, bytes);
  }

 private:
  size_t cursor_ = 0;
  bool ok_ = true;
};

}  // namespace moegrad::ops
