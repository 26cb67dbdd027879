// runtime/cgroup_memory_headroom on made-up /proc and cgroup trees: cgroup
// v2 and v1, a parent's headroom tighter than the leaf's, inactive file
// pages counted as free, use past the limit, v1's "no limit", and files
// that are missing or malformed. Each expected value is worked out from
// the figures the test writes into the tree.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fake_cgroup_root.h"
#include "runtime/cgroup_memory_headroom.h"

namespace {

using moegrad::test::cgroup_mount_line;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

class Headroom : public moegrad::test::FakeCgroupRoot {
 protected:
  // A cgroup v2 directory's limit ("max" or bytes), use and inactive file
  // pages (no memory.stat where `inactive_file` is empty).
  void write_v2(const std::string& dir, const std::string& max, uint64_t current, const std::string& inactive_file) {
    write(dir + "/memory.max", max + "\n");
    write(dir + "/memory.current", std::to_string(current) + "\n");
    if (!inactive_file.empty())
      write(dir + "/memory.stat", "anon 4096\nfile 8192\nactive_file 1234\ninactive_file " + inactive_file +
                                      "\nslab 77\n");
  }

  std::optional<uint64_t> headroom() const { return moegrad::runtime::cgroup_memory_headroom(root_); }
};

const std::string kV2Mount = cgroup_mount_line(30, "/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate");

// 4 GiB limit, 1 GiB in use of which 256 MiB inactive file pages:
// 4 GiB - (1 GiB - 256 MiB).
TEST_F(Headroom, V2Leaf) {
  write("/proc/self/cgroup", "0::/system.slice/job.service\n");
  write("/proc/self/mountinfo", kV2Mount);
  write_v2("/sys/fs/cgroup/system.slice/job.service", std::to_string(4 * kGiB), kGiB, std::to_string(256 * kMiB));
  EXPECT_EQ(headroom(), 4 * kGiB - (kGiB - 256 * kMiB));
}

// Every ancestor's limit binds too; the least headroom counts, and "max"
// (or no memory.max, as at the root) is none. Nothing above the mount.
TEST_F(Headroom, V2TighterParent) {
  write("/proc/self/cgroup", "0::/a/b\n");
  write("/proc/self/mountinfo", kV2Mount);
  write_v2("/sys/fs", std::to_string(kMiB), 0, "0");  // above the mount: not a cgroup
  write_v2("/sys/fs/cgroup/a/b", "max", kGiB, "0");
  EXPECT_EQ(headroom(), std::nullopt);
  write_v2("/sys/fs/cgroup/a", std::to_string(2 * kGiB), 1536 * kMiB, "0");
  EXPECT_EQ(headroom(), 512 * kMiB);
  write_v2("/sys/fs/cgroup/a/b", std::to_string(8 * kGiB), kGiB, "0");  // looser than its parent's
  EXPECT_EQ(headroom(), 512 * kMiB);
  write_v2("/sys/fs/cgroup/a/b", std::to_string(1280 * kMiB), kGiB, "0");
  EXPECT_EQ(headroom(), 256 * kMiB);
}

// Use at or past the limit leaves nothing; inactive file pages beyond the
// use (the files are read one after the other) leave the whole limit.
TEST_F(Headroom, UsePastTheLimitOrAllReclaimable) {
  write("/proc/self/cgroup", "0::/\n");
  write("/proc/self/mountinfo", kV2Mount);
  write_v2("/sys/fs/cgroup", std::to_string(kGiB), kGiB + 4096, "0");
  EXPECT_EQ(headroom(), 0u);
  write_v2("/sys/fs/cgroup", std::to_string(kGiB), kGiB, "0");
  EXPECT_EQ(headroom(), 0u);
  write_v2("/sys/fs/cgroup", std::to_string(kGiB), 100 * kMiB, std::to_string(200 * kMiB));
  EXPECT_EQ(headroom(), kGiB);
}

// cgroup v1: the memory controller's hierarchy, its hierarchical
// total_inactive_file (not the cgroup's own inactive_file), and its
// "no limit", the largest page multiple below 2^63. The cpu hierarchy's
// directories and a v2 mount without the memory controller add nothing.
TEST_F(Headroom, V1MemoryController) {
  write("/proc/self/cgroup", "12:memory:/job\n4:cpu,cpuacct:/job\n0::/job\n");
  write("/proc/self/mountinfo", moegrad::test::hybrid_cgroup_mounts());
  const std::string unlimited = "9223372036854771712";
  for (const char* dir : {"/sys/fs/cgroup/cpu,cpuacct/job", "/sys/fs/cgroup/memory/job"}) {
    write(std::string(dir) + "/memory.limit_in_bytes", std::to_string(kGiB) + "\n");
    write(std::string(dir) + "/memory.usage_in_bytes", std::to_string(600 * kMiB) + "\n");
    write(std::string(dir) + "/memory.stat", "cache 1\ninactive_file " + std::to_string(10 * kMiB) +
                                                 "\ntotal_inactive_file " + std::to_string(100 * kMiB) + "\n");
  }
  write("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", unlimited + "\n");
  EXPECT_EQ(headroom(), std::nullopt);
  write("/sys/fs/cgroup/memory/memory.limit_in_bytes", unlimited + "\n");  // the root, also unlimited
  write("/sys/fs/cgroup/memory/memory.usage_in_bytes", std::to_string(3 * kGiB) + "\n");
  EXPECT_EQ(headroom(), std::nullopt);
  write("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(kGiB) + "\n");
  EXPECT_EQ(headroom(), kGiB - (600 * kMiB - 100 * kMiB));
}

// v1 too: an ancestor's limit binds its children (with use_hierarchy, which
// recent kernels no longer let be turned off), and its use counts theirs.
TEST_F(Headroom, V1TighterParent) {
  write("/proc/self/cgroup", "5:memory:/a/b\n");
  write("/proc/self/mountinfo", cgroup_mount_line(31, "/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory"));
  const std::string unlimited = "9223372036854771712";
  auto v1 = [&](const std::string& dir, const std::string& limit, uint64_t usage) {
    write(dir + "/memory.limit_in_bytes", limit + "\n");
    write(dir + "/memory.usage_in_bytes", std::to_string(usage) + "\n");
  };
  v1("/sys/fs/cgroup/memory/a/b", unlimited, kGiB);
  v1("/sys/fs/cgroup/memory/a", std::to_string(3 * kGiB), 2 * kGiB);
  v1("/sys/fs/cgroup/memory", unlimited, 5 * kGiB);
  v1("/sys/fs/cgroup", std::to_string(kMiB), 0);  // above the mount: not a cgroup
  EXPECT_EQ(headroom(), kGiB);
  v1("/sys/fs/cgroup/memory/a/b", std::to_string(1536 * kMiB), kGiB);
  EXPECT_EQ(headroom(), 512 * kMiB);
}

// Memory is charged to the process's cgroup, not to the one a thread was
// moved to (v1 lets a thread join another cgroup's `tasks`): the process's
// cgroup counts, /proc/thread-self/cgroup is not read.
TEST_F(Headroom, TheProcessCgroupNotTheThreads) {
  write("/proc/self/cgroup", "0::/app\n");
  write("/proc/thread-self/cgroup", "0::/other\n");
  write("/proc/self/mountinfo", kV2Mount);
  write_v2("/sys/fs/cgroup/app", std::to_string(2 * kGiB), kGiB, "0");
  write_v2("/sys/fs/cgroup/other", std::to_string(kMiB), 0, "0");
  EXPECT_EQ(headroom(), kGiB);
}

// A container's own cgroup bound at the mount point (v1 in docker:
// "memory:/docker/abc" mounted with root /docker/abc).
TEST_F(Headroom, V1ProcessAtTheMountRoot) {
  write("/proc/self/cgroup", "9:memory:/docker/abc\n");
  write("/proc/self/mountinfo", cgroup_mount_line(35, "/docker/abc", "/sys/fs/cgroup/memory", "cgroup", "rw,memory", 0));
  write("/sys/fs/cgroup/memory/memory.limit_in_bytes", std::to_string(2 * kGiB));
  write("/sys/fs/cgroup/memory/memory.usage_in_bytes", std::to_string(kGiB));
  EXPECT_EQ(headroom(), kGiB);  // no memory.stat: nothing counted as reclaimable
}

TEST_F(Headroom, UnreadableOrMalformedFilesGiveNone) {
  EXPECT_EQ(headroom(), std::nullopt);  // no /proc at all
  write("/proc/self/cgroup", "0::/a\n");
  write("/proc/self/mountinfo", "garbage\n" + kV2Mount);
  EXPECT_EQ(headroom(), std::nullopt);  // no memory files
  write("/sys/fs/cgroup/a/memory.max", std::to_string(kGiB));
  EXPECT_EQ(headroom(), kGiB);  // no memory.current: the use is unknown, no more than the limit
  const std::vector<std::string> bad_values{"",        "-1",       "1e9", "12 34", "0x100", "9223372036854775808",
                                            "4611686018427387904", "99999999999999999999", "max"};
  write("/sys/fs/cgroup/a/memory.current", "1000\n");
  for (const std::string& bad : bad_values) {
    write("/sys/fs/cgroup/a/memory.max", bad);
    EXPECT_EQ(headroom(), std::nullopt) << "memory.max '" << bad << "'";
  }
  write("/sys/fs/cgroup/a/memory.max", "5000");
  for (const std::string& bad : std::vector<std::string>{"", "-5", "1.5", "7 7"}) {
    write("/sys/fs/cgroup/a/memory.current", bad);
    EXPECT_EQ(headroom(), 5000u) << "memory.current '" << bad << "'";
  }
  write("/sys/fs/cgroup/a/memory.current", "1000");
  write("/sys/fs/cgroup/a/memory.stat", "inactive_file lots\n");  // unreadable: none reclaimable
  EXPECT_EQ(headroom(), 4000u);
  write("/sys/fs/cgroup/a/memory.stat", "inactive_file 300\n");
  EXPECT_EQ(headroom(), 4300u);
}

}  // namespace
