// runtime/cgroup_cpu_limit and the default thread count it narrows, on
// made-up /proc and cgroup trees in a temporary directory: cgroup v2 and v1,
// a parent's limit tighter than the leaf's, a container's own cgroup bound
// at the mount point, paths the mount does not show, and files that are
// missing or malformed. Each expected value is the quota / period written
// into the tree by the test.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "fake_cgroup_root.h"
#include "runtime/cgroup_cpu_limit.h"
#include "runtime/usable_cpus.h"

namespace {

using moegrad::runtime::cgroup_cpu_limit;

class FakeRoot : public moegrad::test::FakeCgroupRoot {
 protected:
  // A v1 cgroup directory's quota and period (microseconds).
  void write_v1(const std::string& dir, const std::string& quota, const std::string& period = "100000") {
    write(dir + "/cpu.cfs_quota_us", quota + "\n");
    write(dir + "/cpu.cfs_period_us", period + "\n");
  }

  std::optional<double> limit() const { return cgroup_cpu_limit(root_); }
};

using moegrad::test::cgroup_mount_line;

const std::string kV2Mount = cgroup_mount_line(30, "/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate");

TEST_F(FakeRoot, V2LeafLimit) {
  write("/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  write("/proc/self/mountinfo", kV2Mount);
  write("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "250000 100000\n");
  EXPECT_EQ(limit(), 2.5);
}

// A thread moved into a threaded child cgroup (v2) gets that cgroup's limit
// as well as its process's: /proc/thread-self/cgroup names it, and is read
// before /proc/self/cgroup. Without it (kernels before 3.17), the process's.
TEST_F(FakeRoot, V2ThreadedChildOfTheCallingThread) {
  write("/proc/self/cgroup", "0::/app\n");
  write("/proc/self/mountinfo", kV2Mount);
  write("/sys/fs/cgroup/app/cpu.max", "400000 100000\n");
  write("/sys/fs/cgroup/app/workers/cpu.max", "150000 100000\n");
  EXPECT_EQ(limit(), 4.0);
  write("/proc/thread-self/cgroup", "0::/app/workers\n");
  EXPECT_EQ(limit(), 1.5);
  write("/sys/fs/cgroup/app/cpu.max", "100000 100000\n");  // the process's, tighter still
  EXPECT_EQ(limit(), 1.0);
}

// The kernel enforces every ancestor's limit too; "max" is no limit. The
// tightest counts, wherever it is, but nothing above the mount point.
TEST_F(FakeRoot, V2TighterParentLimit) {
  write("/proc/self/cgroup", "0::/a/b\n");
  write("/proc/self/mountinfo", kV2Mount);
  write("/sys/fs/cpu.max", "10000 100000\n");  // above the mount: not a cgroup
  write("/cpu.max", "10000 100000\n");
  write("/sys/fs/cgroup/a/b/cpu.max", "max 100000\n");
  write("/sys/fs/cgroup/a/cpu.max", "150000 100000\n");
  write("/sys/fs/cgroup/cpu.max", "800000 100000\n");
  EXPECT_EQ(limit(), 1.5);
  write("/sys/fs/cgroup/a/b/cpu.max", "400000 100000\n");  // looser than its parent
  EXPECT_EQ(limit(), 1.5);
  write("/sys/fs/cgroup/a/b/cpu.max", "50000 200000\n");
  EXPECT_EQ(limit(), 0.25);
}

TEST_F(FakeRoot, V2NoLimitAnywhere) {
  write("/proc/self/cgroup", "0::/a\n");
  write("/proc/self/mountinfo", kV2Mount);
  write("/sys/fs/cgroup/a/cpu.max", "max 100000\n");  // the root cgroup has no cpu.max
  EXPECT_EQ(limit(), std::nullopt);
}

// Inside a container with its own cgroup namespace the process is at "/",
// which is the container's cgroup, limit included.
TEST_F(FakeRoot, V2CgroupNamespaceRoot) {
  write("/proc/self/cgroup", "0::/\n");
  write("/proc/self/mountinfo", kV2Mount);
  write("/sys/fs/cgroup/cpu.max", "200000 100000\n");
  EXPECT_EQ(limit(), 2.0);
}

// A container's cgroup bound at the mount point: mountinfo's root field
// names it, and the process's path is read relative to it.
TEST_F(FakeRoot, V2MountOfANonRootCgroup) {
  write("/proc/self/cgroup", "0::/docker/abc/worker\n");
  write("/proc/self/mountinfo", cgroup_mount_line(30, "/docker/abc", "/sys/fs/cgroup", "cgroup2", "rw"));
  write("/sys/fs/cgroup/docker/abc/worker/cpu.max", "10000 100000\n");  // the path read as if from "/"
  write("/sys/fs/cgroup/worker/cpu.max", "300000 100000\n");
  write("/sys/fs/cgroup/cpu.max", "max 100000\n");
  EXPECT_EQ(limit(), 3.0);
}

// The process in the very cgroup bound at the mount point (cgroup v1 in a
// container: "cpu,cpuacct:/docker/abc", mounted with root /docker/abc).
TEST_F(FakeRoot, V1ProcessAtTheMountRoot) {
  write("/proc/self/cgroup", "4:cpu,cpuacct:/docker/abc\n");
  write("/proc/self/mountinfo",
        cgroup_mount_line(32, "/docker/abc", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct", 0));
  write_v1("/sys/fs/cgroup/cpu,cpuacct", "75000", "50000");
  EXPECT_EQ(limit(), 1.5);
}

// A cgroup path may hold ':' (only the first two separate the fields), and
// mountinfo lines may have no optional fields or several.
TEST_F(FakeRoot, PathWithColonsAndOptionalFields) {
  write("/proc/self/cgroup", "0::/svc:a/b:c\n");
  for (int optional : {0, 3}) {
    write("/proc/self/mountinfo", cgroup_mount_line(30, "/", "/sys/fs/cgroup", "cgroup2", "rw", optional));
    write("/sys/fs/cgroup/svc:a/cpu.max", "200000 100000\n");
    EXPECT_EQ(limit(), 2.0) << optional << " optional fields";
  }
}

// v1 and v2 limits belong to different hierarchies: a v1 cgroup's path is
// not looked up in the v2 mount, nor the other way round.
TEST_F(FakeRoot, EachPathInItsOwnHierarchy) {
  write("/proc/self/cgroup", "4:cpu:/v1only\n0::/v2only\n");
  write("/proc/self/mountinfo",
        cgroup_mount_line(32, "/", "/cg1", "cgroup", "rw,cpu") + cgroup_mount_line(33, "/", "/cg2", "cgroup2", "rw"));
  write("/cg2/v1only/cpu.max", "10000 100000\n");
  write_v1("/cg1/v2only", "10000");
  EXPECT_EQ(limit(), std::nullopt);
  write("/cg2/v2only/cpu.max", "300000 100000\n");
  write_v1("/cg1/v1only", "400000");
  EXPECT_EQ(limit(), 3.0);
}

// A cgroup the mount does not show (outside the namespace or the bound
// subtree) is not guessed at.
TEST_F(FakeRoot, CgroupOutsideTheMountIsIgnored) {
  write("/proc/self/mountinfo", cgroup_mount_line(30, "/docker/abc", "/sys/fs/cgroup", "cgroup2", "rw"));
  write("/sys/fs/cgroup/cpu.max", "100000 100000\n");
  write("/proc/self/cgroup", "0::/docker/other\n");
  EXPECT_EQ(limit(), std::nullopt);
  write("/proc/self/cgroup", "0::/docker/abcdef\n");  // a prefix of the name, not a parent
  EXPECT_EQ(limit(), std::nullopt);
  write("/proc/self/mountinfo", kV2Mount);
  write("/proc/self/cgroup", "0::/../sibling\n");
  EXPECT_EQ(limit(), std::nullopt);
}

// Mount points with a space are written as \040 in mountinfo.
TEST_F(FakeRoot, EscapedMountPoint) {
  write("/proc/self/cgroup", "0::/a\n");
  write("/proc/self/mountinfo", cgroup_mount_line(30, "/", "/cg\\040two", "cgroup2", "rw"));
  write("/cg two/a/cpu.max", "120000 100000\n");
  EXPECT_EQ(limit(), 1.2);
}

// cgroup v1: the cpu controller's hierarchy (here mounted together with
// cpuacct), quota -1 meaning none; other controllers' hierarchies and a v2
// mount without the cpu controller (hybrid systems) add nothing.
TEST_F(FakeRoot, V1CpuController) {
  write("/proc/self/cgroup", "12:memory:/job\n4:cpu,cpuacct:/job/step\n1:name=systemd:/job\n0::/job\n");
  write("/proc/self/mountinfo", moegrad::test::hybrid_cgroup_mounts());
  write_v1("/sys/fs/cgroup/memory/job", "100000");  // not the cpu hierarchy
  write_v1("/sys/fs/cgroup/cpu,cpuacct/job/step", "-1");
  EXPECT_EQ(limit(), std::nullopt);
  write_v1("/sys/fs/cgroup/cpu,cpuacct/job", "350000");
  EXPECT_EQ(limit(), 3.5);
  write_v1("/sys/fs/cgroup/cpu,cpuacct/job/step", "50000");
  EXPECT_EQ(limit(), 0.5);
}

// A controller list that merely contains "cpu" in a name is not the cpu
// controller (cpuset, cpuacct alone), neither in /proc/self/cgroup nor in
// a mount's options.
TEST_F(FakeRoot, V1OtherCpuControllersAreNotLimits) {
  write("/proc/self/cgroup", "3:cpuset:/a\n2:cpuacct:/a\n");
  write("/proc/self/mountinfo", cgroup_mount_line(34, "/", "/sys/fs/cgroup/cpuset", "cgroup", "rw,cpuset") +
                                    cgroup_mount_line(33, "/", "/sys/fs/cgroup/cpuacct", "cgroup", "rw,cpuacct") +
                                    cgroup_mount_line(32, "/", "/sys/fs/cgroup/cpu", "cgroup", "rw,cpu"));
  for (const char* dir : {"/sys/fs/cgroup/cpuset/a", "/sys/fs/cgroup/cpuacct/a", "/sys/fs/cgroup/cpu/a"}) {
    write_v1(dir, "100000");
  }
  EXPECT_EQ(limit(), std::nullopt);
}

TEST_F(FakeRoot, UnreadableOrMalformedFilesGiveNoLimit) {
  EXPECT_EQ(limit(), std::nullopt);  // no /proc at all
  write("/proc/self/cgroup", "0::/a\n");
  EXPECT_EQ(limit(), std::nullopt);  // no mountinfo
  write("/proc/self/mountinfo", "garbage\n" + kV2Mount);
  const std::string huge(400, '9');  // beyond a double: not a limit
  const std::vector<std::string> bad_values{"",         "max",           "100000",          "-5 100000",
                                            "100000 0", "1e5 100000",    "100000 100000 7", "0 100000",
                                            huge + " 100000", "100000 " + huge};
  for (const std::string& bad : bad_values) {
    write("/sys/fs/cgroup/a/cpu.max", bad);
    EXPECT_EQ(limit(), std::nullopt) << "cpu.max '" << bad << "'";
  }
  write("/sys/fs/cgroup/a/cpu.max", "100000 100000");  // no newline: still read
  EXPECT_EQ(limit(), 1.0);
}

// The default thread count: the affinity count, narrowed to the limit
// rounded up, never below one.
TEST(CpuBudget, UsableCpusRoundTheLimitUp) {
  using moegrad::runtime::CpuBudget;
  EXPECT_EQ((CpuBudget{8, std::nullopt}).usable(), 8);
  EXPECT_EQ((CpuBudget{8, 2.0}).usable(), 2);
  EXPECT_EQ((CpuBudget{8, 1.5}).usable(), 2);
  EXPECT_EQ((CpuBudget{8, 0.1}).usable(), 1);
  EXPECT_EQ((CpuBudget{4, 6.0}).usable(), 4);
  EXPECT_EQ((CpuBudget{1, 1e12}).usable(), 1);
}

}  // namespace
