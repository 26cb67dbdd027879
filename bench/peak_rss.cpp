#include "peak_rss.h"

#include <malloc.h>

#include <cstdio>
#include <cstring>

#include "runtime/cgroup_memory_headroom.h"

namespace moegrad::bench {
namespace {

bool reset_high_water_mark() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool wrote = std::fputs("5", f) >= 0;
  return (std::fclose(f) == 0) && wrote;  // the write happens at fclose
}

// The "Key:   N kB" line of a /proc file, in bytes.
std::optional<uint64_t> proc_kib_field(const char* path, const char* key) {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return std::nullopt;
  const size_t key_len = std::strlen(key);
  char line[256];
  std::optional<uint64_t> bytes;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long kib = 0;
    if (std::strncmp(line, key, key_len) == 0 && std::sscanf(line + key_len, "%llu", &kib) == 1) {
      bytes = static_cast<uint64_t>(kib) * 1024;
      break;
    }
  }
  std::fclose(f);
  return bytes;
}

}  // namespace

// The mark restarts from the resident set as it is now, and glibc keeps
// what earlier paths freed on its heaps, resident: one path's peak would
// count its predecessors' buffers. malloc_trim hands free heap pages back
// to the kernel first (in every arena, not only at the top).
PeakRss::PeakRss() : reset_ok_((malloc_trim(0), reset_high_water_mark())) {}

std::optional<uint64_t> PeakRss::peak() const {
  if (!reset_ok_) return std::nullopt;
  return proc_kib_field("/proc/self/status", "VmHWM:");
}

const char* AvailableMemory::source() const {
  return from_cgroup ? "the memory cgroup's limit less its use" : "MemAvailable";
}

std::optional<AvailableMemory> available_memory() {
  const std::optional<uint64_t> machine = proc_kib_field("/proc/meminfo", "MemAvailable:");
  const std::optional<uint64_t> cgroup = runtime::cgroup_memory_headroom();
  if (cgroup && (!machine || *cgroup < *machine)) return AvailableMemory{*cgroup, true};
  if (machine) return AvailableMemory{*machine, false};
  return std::nullopt;
}

std::optional<AvailableMemory> memory_short_of(uint64_t bytes) {
  const std::optional<AvailableMemory> available = available_memory();
  return available && bytes > available->bytes ? available : std::nullopt;
}

}  // namespace moegrad::bench
