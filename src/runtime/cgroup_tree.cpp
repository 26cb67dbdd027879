#include "runtime/cgroup_tree.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

namespace moegrad::runtime::cgroup {
namespace {

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

// A hierarchy this thread belongs to, from /proc/thread-self/cgroup.
struct Hierarchy {
  bool v2;
  std::string path;  // the thread's cgroup within it
};

// A mount of such a hierarchy, from /proc/self/mountinfo: `root` is the
// cgroup shown at `point` (not "/" where a container's own cgroup is bound
// there).
struct Mount {
  bool v2;
  std::string root, point;
};

std::vector<Hierarchy> hierarchies(const std::string& text, const char* v1_controller) {
  std::vector<Hierarchy> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-ID:controller-list:cgroup-path (the path may hold ':')
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      out.push_back({true, path});
    } else if (lists(controllers, v1_controller)) {
      out.push_back({false, path});
    }
  }
  return out;
}

std::vector<Mount> mounts(const std::string& text, const char* v1_controller) {
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
    if (v2 || (fstype == "cgroup" && lists(dash[3], v1_controller)))
      out.push_back({v2, unescape(f[3]), unescape(f[4])});
  }
  return out;
}

// Appends the directories from the cgroup `path` of the hierarchy mounted
// at `m` up to the mount's root; none if the cgroup is not below the
// mount's root.
void add_chain(const std::string& root, const Mount& m, const std::string& path, std::vector<Dir>* out) {
  std::string rel;  // the cgroup below the mount point: "" or "/a/b"
  if (path == m.root) {
    rel = "";
  } else if (m.root == "/" && !path.empty() && path[0] == '/') {
    rel = path;
  } else if (path.rfind(m.root + "/", 0) == 0) {
    rel = path.substr(m.root.size());
  } else {
    return;
  }
  for (const std::string& name : split(rel, '/'))
    if (name == "..") return;
  for (;;) {
    while (!rel.empty() && rel.back() == '/') rel.pop_back();
    out->push_back({root + m.point + rel, m.v2});
    if (rel.empty()) return;
    rel.erase(rel.rfind('/'));
  }
}

}  // namespace

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string trimmed(const std::string& s) {
  const size_t end = s.find_last_not_of(" \t\r\n");
  return end == std::string::npos ? std::string() : s.substr(0, end + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

std::vector<Dir> dirs(const std::string& root, const char* v1_controller, Scope scope) {
  std::optional<std::string> cgroup;
  if (scope == Scope::kThread) cgroup = read_file(root + "/proc/thread-self/cgroup");
  if (!cgroup) cgroup = read_file(root + "/proc/self/cgroup");
  const std::optional<std::string> mountinfo = read_file(root + "/proc/self/mountinfo");
  std::vector<Dir> out;
  if (!cgroup || !mountinfo) return out;
  const std::vector<Mount> all = mounts(*mountinfo, v1_controller);
  for (const Hierarchy& h : hierarchies(*cgroup, v1_controller)) {
    for (const Mount& m : all) {
      if (m.v2 == h.v2) add_chain(root, m, h.path, &out);
    }
  }
  return out;
}

}  // namespace moegrad::runtime::cgroup
