// Where a workspace's regions start (SPEC §6): every region 512-byte
// aligned from the first 512-byte boundary of the caller's buffer, which
// may have any alignment; the sizes reported include the 511 bytes of
// slack that alignment may cost. Shared by grad-x's plan and driver and by
// the layer operators.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moegrad {

inline constexpr size_t kWorkspaceAlign = 512;

// The first kWorkspaceAlign boundary at or after `workspace`.
inline std::byte* aligned_base(void* workspace) {
  const auto addr = reinterpret_cast<uintptr_t>(workspace);
  const uintptr_t aligned = (addr + kWorkspaceAlign - 1) & ~(uintptr_t{kWorkspaceAlign} - 1);
  return static_cast<std::byte*>(workspace) + (aligned - addr);
}

}  // namespace moegrad
