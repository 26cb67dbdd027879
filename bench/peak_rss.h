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

// What can still be allocated without swapping and without the OOM killer:
// MemAvailable from /proc/meminfo (the kernel's estimate for the whole
// machine), or less where the process's memory cgroups leave less (a
// container's limit: runtime/cgroup_memory_headroom.h). nullopt where
// neither can be read.
struct AvailableMemory {
  uint64_t bytes;
  bool from_cgroup;  // the cgroups' headroom, tighter than MemAvailable
  // Where `bytes` comes from, for messages: "MemAvailable" or "the memory
  // cgroup's limit less its use".
  const char* source() const;
};
std::optional<AvailableMemory> available_memory();

// The memory available where `bytes` exceed it; nullopt where they fit or
// it cannot be read (the allocations then say what does not fit).
std::optional<AvailableMemory> memory_short_of(uint64_t bytes);

}  // namespace moegrad::bench
