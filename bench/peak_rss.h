// Memory figures from /proc (Linux) for `moegrad bench`.
//
// Peak resident memory of one stretch of the run: reset the process's
// high-water mark by writing "5" to /proc/self/clear_refs (Linux >= 4.0), run,
// then read VmHWM from /proc/self/status. The mark is of the whole process, so
// it includes the inputs every path shares and the bench's two grad_x
// buffers (the fused result and the other paths'), plus, with more than one
// thread count, a copy of the first one's fused grad_x: batch*K*4 bytes each.
// The differences between paths are what each one adds (workspace,
// d_expanded_x, library scratch).
#pragma once

#include <cstdint>
#include <optional>

namespace moegrad::bench {

class PeakRss {
 public:
  // Resets the high-water mark to the current RSS; remembers whether it could.
  PeakRss();
  // VmHWM in bytes since construction; nullopt if the reset or the read failed.
  std::optional<uint64_t> peak() const;

 private:
  bool reset_ok_;
};

// MemAvailable from /proc/meminfo: what the kernel estimates can still be
// allocated without swapping; nullopt where it cannot be read.
std::optional<uint64_t> available_memory_bytes();

}  // namespace moegrad::bench
