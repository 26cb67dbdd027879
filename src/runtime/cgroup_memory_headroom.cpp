#include "runtime/cgroup_memory_headroom.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "runtime/cgroup_tree.h"

namespace moegrad::runtime {
namespace {

// From 2^62 bytes on a limit is none: cgroup v1 writes its "no limit" as
// the largest multiple of the page size below 2^63.
constexpr uint64_t kNoLimit = uint64_t{1} << 62;

// A whole decimal number of bytes below 2^63, or nullopt.
std::optional<uint64_t> bytes(const std::string& s) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
  if (v > static_cast<unsigned long long>(INT64_MAX)) return std::nullopt;
  return static_cast<uint64_t>(v);
}

std::optional<uint64_t> bytes_in(const std::string& path) {
  const std::optional<std::string> text = cgroup::read_file(path);
  return text ? bytes(cgroup::trimmed(*text)) : std::nullopt;
}

// The value of the line "`key` N" of a memory.stat file; 0 where there is
// none (nothing is counted as reclaimable).
uint64_t stat_field(const std::string& path, const std::string& key) {
  const std::optional<std::string> text = cgroup::read_file(path);
  if (!text) return 0;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string> f = cgroup::split(cgroup::trimmed(line), ' ');
    if (f.size() == 2 && f[0] == key) return bytes(f[1]).value_or(0);
  }
  return 0;
}

// limit - working set of one cgroup directory, where it has a limit (the
// limit where its use cannot be read).
std::optional<uint64_t> headroom_at(const cgroup::Dir& dir) {
  const std::optional<uint64_t> limit =
      bytes_in(dir.path + (dir.v2 ? "/memory.max" : "/memory.limit_in_bytes"));  // v2's "max": none
  if (!limit || *limit >= kNoLimit) return std::nullopt;
  const std::optional<uint64_t> usage =
      bytes_in(dir.path + (dir.v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  if (!usage) return limit;
  const uint64_t inactive_file =
      stat_field(dir.path + "/memory.stat", dir.v2 ? "inactive_file" : "total_inactive_file");
  const uint64_t working_set = *usage - std::min(inactive_file, *usage);
  return *limit - std::min(working_set, *limit);
}

}  // namespace

std::optional<uint64_t> cgroup_memory_headroom(const std::string& root) {
  try {
    std::optional<uint64_t> best;
    for (const cgroup::Dir& dir : cgroup::dirs(root, "memory", cgroup::Scope::kProcess)) {
      if (const std::optional<uint64_t> room = headroom_at(dir)) best = std::min(best.value_or(*room), *room);
    }
    return best;
  } catch (...) {  // bad_alloc: the caller goes by MemAvailable alone
    return std::nullopt;
  }
}

}  // namespace moegrad::runtime
