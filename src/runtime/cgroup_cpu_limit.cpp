#include "runtime/cgroup_cpu_limit.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

namespace moegrad::runtime {
namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

// Whether the comma-separated `list` has `item` as one of its entries.
bool lists(const std::string& list, const char* item) {
  const std::vector<std::string> entries = split(list, ',');
  return std::find(entries.begin(), entries.end(), item) != entries.end();
}

bool is_octal(char c) { return c >= '0' && c <= '7'; }

// mountinfo writes a space, tab, newline or backslash in a path as \ooo.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && s.size() - i > 3 && is_octal(s[i + 1]) && is_octal(s[i + 2]) && is_octal(s[i + 3])) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A whole non-negative decimal number that a double holds (finite), or
// nullopt.
std::optional<double> number(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const double v = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string trimmed(const std::string& s) {
  const size_t end = s.find_last_not_of(" \t\r\n");
  return end == std::string::npos ? std::string() : s.substr(0, end + 1);
}

// quota / period when both are positive numbers; "max" (v2) and -1 (v1),
// no limit, are not.
std::optional<double> ratio(const std::string& quota_text, const std::string& period_text) {
  const std::optional<double> quota = number(quota_text), period = number(period_text);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return *quota / *period;
}

// Keeps in *best the smaller of it and `limit`, where there is one.
void keep_tightest(std::optional<double>* best, const std::optional<double>& limit) {
  if (limit) *best = std::min(best->value_or(*limit), *limit);
}

// A cgroup hierarchy this process belongs to: v2, or v1 with the cpu
// controller.
struct Hierarchy {
  bool v2;
  std::string path;  // the thread's cgroup within it, from /proc/thread-self/cgroup
};

// A mount of such a hierarchy, from /proc/self/mountinfo: `root` is the
// cgroup shown at `point` (not "/" where a container's own cgroup is bound
// there).
struct Mount {
  bool v2;
  std::string root, point;
};

std::vector<Hierarchy> hierarchies(const std::string& text) {
  std::vector<Hierarchy> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-ID:controller-list:cgroup-path (the path may hold ':')
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      out.push_back({true, path});
    } else if (lists(controllers, "cpu")) {
      out.push_back({false, path});
    }
  }
  return out;
}

std::vector<Mount> mounts(const std::string& text) {
  std::vector<Mount> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    // ID parent major:minor root point options [optional...] - fstype source super-options
    // (the first "-" after the six fixed fields: a path or an optional field
    // is never "-" alone)
    const std::vector<std::string> f = split(line, ' ');
    const auto dash = f.size() > 6 ? std::find(f.begin() + 6, f.end(), "-") : f.end();
    if (dash == f.end() || f.end() - dash < 4) continue;
    const std::string& fstype = dash[1];
    const bool v2 = fstype == "cgroup2";
    if (v2 || (fstype == "cgroup" && lists(dash[3], "cpu"))) out.push_back({v2, unescape(f[3]), unescape(f[4])});
  }
  return out;
}

// The limit set on one cgroup directory, if any.
std::optional<double> limit_at(const std::string& dir, bool v2) {
  if (v2) {
    const std::optional<std::string> max = read_file(dir + "/cpu.max");  // "max 100000" or "150000 100000"
    if (!max) return std::nullopt;
    const std::vector<std::string> f = split(trimmed(*max), ' ');
    return f.size() == 2 ? ratio(f[0], f[1]) : std::nullopt;
  }
  const std::optional<std::string> quota = read_file(dir + "/cpu.cfs_quota_us");  // -1: none
  const std::optional<std::string> period = read_file(dir + "/cpu.cfs_period_us");
  return quota && period ? ratio(trimmed(*quota), trimmed(*period)) : std::nullopt;
}

// The tightest limit from the cgroup `path` of the hierarchy mounted at `m`
// up to the mount's root; nullopt if none, or if the cgroup is not below
// the mount's root (another container's, or outside a cgroup namespace:
// "/../x").
std::optional<double> tightest(const std::string& root, const Mount& m, const std::string& path) {
  std::string rel;  // the cgroup below the mount point: "" or "/a/b"
  if (path == m.root) {
    rel = "";
  } else if (m.root == "/" && !path.empty() && path[0] == '/') {
    rel = path;
  } else if (path.rfind(m.root + "/", 0) == 0) {
    rel = path.substr(m.root.size());
  } else {
    return std::nullopt;
  }
  for (const std::string& name : split(rel, '/'))
    if (name == "..") return std::nullopt;
  std::optional<double> best;
  for (;;) {
    while (!rel.empty() && rel.back() == '/') rel.pop_back();
    keep_tightest(&best, limit_at(root + m.point + rel, m.v2));
    if (rel.empty()) return best;
    rel.erase(rel.rfind('/'));
  }
}

}  // namespace

std::optional<double> cgroup_cpu_limit(const std::string& root) {
  try {
    // The calling thread's cgroups: a thread may sit in a threaded child
    // cgroup of its process's (cgroup v2's threaded mode, v1's per-thread
    // tasks) with a limit of its own, and the workers it starts inherit them.
    // Kernels before 3.17 have no /proc/thread-self: the process's, then.
    std::optional<std::string> cgroup = read_file(root + "/proc/thread-self/cgroup");
    if (!cgroup) cgroup = read_file(root + "/proc/self/cgroup");
    const std::optional<std::string> mountinfo = read_file(root + "/proc/self/mountinfo");
    if (!cgroup || !mountinfo) return std::nullopt;
    const std::vector<Mount> all = mounts(*mountinfo);
    std::optional<double> best;
    for (const Hierarchy& h : hierarchies(*cgroup)) {
      for (const Mount& m : all) {
        if (m.v2 != h.v2) continue;
        keep_tightest(&best, tightest(root, m, h.path));
      }
    }
    return best;
  } catch (...) {  // bad_alloc: a default thread count does not fail a context
    return std::nullopt;
  }
}

}  // namespace moegrad::runtime
