// A made-up /proc and cgroup tree in a fresh temporary directory, for the
// runtime's cgroup readers (they take the directory as their root), and
// the mountinfo lines such a tree needs.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace moegrad::test {

class FakeCgroupRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "moegrad_cgroup_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // Writes `text` at `path` under the fake root, creating directories.
  void write(const std::string& path, const std::string& text) {
    const std::filesystem::path p = std::filesystem::path(root_ + path);
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

  std::string root_;
};

// A line of /proc/self/mountinfo for a cgroup mount, with `optional` of
// the optional fields (zero or more) that precede the " - " separator.
inline std::string cgroup_mount_line(int id, const std::string& root, const std::string& point,
                                     const std::string& fstype, const std::string& super_options, int optional = 1) {
  std::string fields;
  for (int i = 0; i < optional; ++i) fields += " shared:" + std::to_string(9 + i);
  return std::to_string(id) + " 23 0:" + std::to_string(id) + " " + root + " " + point +
         " rw,nosuid,nodev,noexec,relatime" + fields + " - " + fstype + " " + fstype + " " + super_options + "\n";
}

// A hybrid system's mounts: v1 memory, v1 cpu with cpuacct, and v2 without
// either controller.
inline std::string hybrid_cgroup_mounts() {
  return cgroup_mount_line(31, "/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory") +
         cgroup_mount_line(32, "/", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct") +
         cgroup_mount_line(33, "/", "/sys/fs/cgroup/unified", "cgroup2", "rw");
}

}  // namespace moegrad::test
