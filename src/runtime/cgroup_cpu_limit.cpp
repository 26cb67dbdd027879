#include "runtime/cgroup_cpu_limit.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "runtime/cgroup_tree.h"

namespace moegrad::runtime {
namespace {

// A whole non-negative decimal number that a double holds (finite), or
// nullopt.
std::optional<double> number(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const double v = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

// quota / period when both are positive numbers; "max" (v2) and -1 (v1),
// no limit, are not.
std::optional<double> ratio(const std::string& quota_text, const std::string& period_text) {
  const std::optional<double> quota = number(quota_text), period = number(period_text);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return *quota / *period;
}

// The limit set on one cgroup directory, if any.
std::optional<double> limit_at(const cgroup::Dir& dir) {
  if (dir.v2) {
    const std::optional<std::string> max = cgroup::read_file(dir.path + "/cpu.max");  // "max 100000" or "150000 100000"
    if (!max) return std::nullopt;
    const std::vector<std::string> f = cgroup::split(cgroup::trimmed(*max), ' ');
    return f.size() == 2 ? ratio(f[0], f[1]) : std::nullopt;
  }
  const std::optional<std::string> quota = cgroup::read_file(dir.path + "/cpu.cfs_quota_us");  // -1: none
  const std::optional<std::string> period = cgroup::read_file(dir.path + "/cpu.cfs_period_us");
  return quota && period ? ratio(cgroup::trimmed(*quota), cgroup::trimmed(*period)) : std::nullopt;
}

}  // namespace

std::optional<double> cgroup_cpu_limit(const std::string& root) {
  try {
    // The calling thread's cgroups: a thread may sit in a threaded child
    // cgroup of its process's (cgroup v2's threaded mode, v1's per-thread
    // tasks) with a limit of its own, and the workers it starts inherit them.
    std::optional<double> best;
    for (const cgroup::Dir& dir : cgroup::dirs(root, "cpu", cgroup::Scope::kThread)) {
      if (const std::optional<double> limit = limit_at(dir)) best = std::min(best.value_or(*limit), *limit);
    }
    return best;
  } catch (...) {  // bad_alloc: a default thread count does not fail a context
    return std::nullopt;
  }
}

}  // namespace moegrad::runtime
