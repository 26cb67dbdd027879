// What grad-x does with paths that are not plain files, and when it is
// interrupted: a symlinked output keeps its link and its file's permission
// bits, a FIFO is written in place (renaming over it would replace the
// node: as root, over /dev/null, for everyone), so is a file the command
// already holds open for writing (/dev/stdout redirected to a file: replacing
// it would lose what the caller wrote there), a read-only output is refused,
// a name as long as the file system allows works and a longer one is
// refused before the work, a FIFO input is refused
// instead of waiting for a writer, a write past `ulimit -f` is one error line
// with the old output kept, SIGTERM leaves no temp file, and an input
// truncated while it is read ends in one error line, not a bus error.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "grad_x_fixture.h"

namespace moegrad::cli_test {
namespace {

using namespace std::chrono_literals;

class OutputPathTest : public GradXTest {
 protected:
  void SetUp() override {
    GradXTest::SetUp();
    write_problem(p_, e_);
  }

  // The output of a plain run, to compare against.
  std::string plain_output() {
    const RunResult r = run_moegrad(args(p_, e_, path("plain.npy")));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_file("plain.npy");
  }

  // As root: the user nobody, who is then given the test directory and all
  // it holds, so that a command run as nobody may create files there.
  // nullopt where that cannot be had: a chown fails (a user namespace that
  // maps no such user), or nobody may not run the command or reach the
  // directory (a checkout or TMPDIR under /root, mode 0700); the callers
  // then skip.
  std::optional<std::pair<uid_t, gid_t>> hand_the_directory_to_nobody() {
    const passwd* nobody = getpwnam("nobody");
    const std::pair<uid_t, gid_t> user{nobody != nullptr ? nobody->pw_uid : 65534,
                                       nobody != nullptr ? nobody->pw_gid : 65534};
    for (const auto& entry : std::filesystem::directory_iterator(dir()))
      if (chown(entry.path().c_str(), user.first, user.second) != 0) return std::nullopt;
    if (chown(dir().c_str(), user.first, user.second) != 0) return std::nullopt;
    const pid_t probe = fork();
    if (probe == 0) {
      const bool ok = setgroups(0, nullptr) == 0 && setgid(user.second) == 0 && setuid(user.first) == 0 &&
                      access(MOEGRAD_CLI_PATH, X_OK) == 0 && access(dir().c_str(), W_OK | X_OK) == 0;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    if (probe < 0 || waitpid(probe, &status, 0) != probe || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return std::nullopt;
    return user;
  }

  const MoeProblem p_ = make_problem(6, 2, 4, 5, 7, 2);
  const Encoding e_;
};

TEST_F(OutputPathTest, ASymlinkStaysAndItsFileIsReplacedWithItsPermissions) {
  const std::string want = plain_output();
  write_file("target.npy", "old");
  ASSERT_EQ(chmod(path("target.npy").c_str(), 0600), 0);
  std::filesystem::create_symlink("target.npy", dir() / "link.npy");
  const RunResult r = run_moegrad(args(p_, e_, path("link.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(dir() / "link.npy"));
  EXPECT_EQ(read_file("target.npy"), want);
  struct stat st {};
  ASSERT_EQ(stat(path("target.npy").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "a private output became readable by others";
  EXPECT_EQ(listing(), (std::set<std::string>{"gy.npy", "w.npy", "idx.npy", "gl.npy", "plain.npy", "target.npy",
                                              "link.npy"}));
}

TEST_F(OutputPathTest, ASymlinkToNothingIsRefused) {
  std::filesystem::create_symlink("missing.npy", dir() / "dangling.npy");
  expect_error(args(p_, e_, path("dangling.npy")), 1, "a symbolic link to a file that does not exist");
  // A loop is not a link to nothing: the system's reason, as it gives it.
  std::filesystem::create_symlink("loop.npy", dir() / "loop.npy");
  expect_error(args(p_, e_, path("loop.npy")), 1, path("loop.npy") + ": " + std::strerror(ELOOP));
}

// A file rename() may not replace is rewritten in place, as a shell
// redirection would, once the result is complete; until then, and when the
// run fails, it keeps its contents. Its inode, owner and mode stay.
class InPlaceOutputTest : public OutputPathTest {
 protected:
  // Longer than the output: written over without truncation, its tail
  // would show.
  static std::string old_contents() { return std::string(64 * 1024, 'x'); }

  void expect_written_in_place(const std::string& name, const std::string& shown_as, const RunOptions& as) {
    const std::string want = plain_output();
    struct stat before {};
    ASSERT_EQ(stat(path(name).c_str(), &before), 0);
    std::vector<std::string> failing = args(p_, e_, path(shown_as));
    *(std::find(failing.begin(), failing.end(), "--batch") + 1) = "1";  // M exceeds the slots
    expect_error(failing, 1, "MOEGRAD_STATUS_M_EXCEEDS_SLOTS", as);
    EXPECT_EQ(read_file(name), old_contents());
    const RunResult r = run_moegrad(args(p_, e_, path(shown_as)), as);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(read_file(name), want);
    struct stat after {};
    ASSERT_EQ(stat(path(name).c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(after.st_uid, before.st_uid);
    EXPECT_EQ(after.st_mode, before.st_mode);
  }
};

// rename() over a mount point fails (EBUSY): a file bind-mounted into a
// container (`docker -v host/dx.npy:/out/dx.npy`) could not be written at
// all, and only after the work.
TEST_F(InPlaceOutputTest, ABindMountedFile) {
  write_file("host.npy", old_contents());
  write_file("mounted.npy", "");
  if (mount(path("host.npy").c_str(), path("mounted.npy").c_str(), nullptr, MS_BIND, nullptr) != 0)
    GTEST_SKIP() << "cannot bind-mount here: " << std::strerror(errno);
  struct Unmount {  // also when an assertion ends the test: the directory is removed after it
    std::string at;
    ~Unmount() { EXPECT_EQ(umount2(at.c_str(), 0), 0) << at << ": " << std::strerror(errno); }
  } unmount{path("mounted.npy")};
  expect_written_in_place("host.npy", "mounted.npy", {});
}

// In a sticky directory (/tmp) only the file's or the directory's owner may
// rename over a file (EPERM): another user, whom the file's mode lets
// write it, is written in place. Here root owns the directory and the file.
TEST_F(InPlaceOutputTest, AnotherUsersFileInAStickyDirectory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to own the files and run the command as another user";
  const std::optional<std::pair<uid_t, gid_t>> nobody = hand_the_directory_to_nobody();
  if (!nobody) GTEST_SKIP() << "cannot run the command as nobody in the test directory";
  ASSERT_EQ(mkdir(path("sticky").c_str(), 0777), 0);
  ASSERT_EQ(chmod(path("sticky").c_str(), 01777), 0);
  write_file("sticky/out.npy", old_contents());
  ASSERT_EQ(chmod(path("sticky/out.npy").c_str(), 0666), 0);
  expect_written_in_place("sticky/out.npy", "sticky/out.npy", RunOptions{.user = nobody});
  std::set<std::string> in_sticky;
  for (const auto& entry : std::filesystem::directory_iterator(dir() / "sticky"))
    in_sticky.insert(entry.path().filename().string());
  EXPECT_EQ(in_sticky, std::set<std::string>{"out.npy"});
}

// A directory the user may not write to holds no temp file, but the user's
// writable file in it is written, as `> file` or numpy.save writes it.
TEST_F(InPlaceOutputTest, AWritableFileInADirectoryTheUserMayNotWrite) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to own the files and run the command as another user";
  const std::optional<std::pair<uid_t, gid_t>> nobody = hand_the_directory_to_nobody();
  if (!nobody) GTEST_SKIP() << "cannot run the command as nobody in the test directory";
  ASSERT_EQ(mkdir(path("shared").c_str(), 0755), 0);  // root's
  write_file("shared/out.npy", old_contents());
  ASSERT_EQ(chown(path("shared/out.npy").c_str(), nobody->first, nobody->second), 0);
  expect_written_in_place("shared/out.npy", "shared/out.npy", RunOptions{.user = nobody});
  // A new file there is still refused, before any work.
  const RunResult r = run_moegrad(args(p_, e_, path("shared/new.npy")), RunOptions{.user = nobody});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot create a file in"), std::string::npos) << r.err;
}

// The sticky rule yields to CAP_FOWNER, not to uid 0: root in a container
// that drops the capability may not rename over nobody's file in nobody's
// sticky directory either.
TEST_F(InPlaceOutputTest, RootWithoutCapFownerInAStickyDirectory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  const pid_t probe = fork();
  if (probe == 0) _exit(prctl(PR_CAPBSET_DROP, CAP_FOWNER, 0, 0, 0) == 0 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(probe, &status, 0), probe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) GTEST_SKIP() << "cannot drop CAP_FOWNER here";
  const std::optional<std::pair<uid_t, gid_t>> nobody = hand_the_directory_to_nobody();
  if (!nobody) GTEST_SKIP() << "cannot run the command as nobody in the test directory";
  ASSERT_EQ(mkdir(path("sticky").c_str(), 0777), 0);
  ASSERT_EQ(chmod(path("sticky").c_str(), 01777), 0);
  write_file("sticky/out.npy", old_contents());
  ASSERT_EQ(chown(path("sticky").c_str(), nobody->first, nobody->second), 0);
  ASSERT_EQ(chown(path("sticky/out.npy").c_str(), nobody->first, nobody->second), 0);
  expect_written_in_place("sticky/out.npy", "sticky/out.npy", RunOptions{.dropped_capabilities = {CAP_FOWNER}});
}

TEST_F(OutputPathTest, AFifoIsWrittenInPlace) {
  const std::string want = plain_output();
  ASSERT_EQ(mkfifo(path("out.fifo").c_str(), 0600), 0);
  // The reader: opening blocks until grad-x opens the other end.
  auto read = std::async(std::launch::async, [this] { return read_file("out.fifo"); });
  const RunResult r = run_moegrad(args(p_, e_, path("out.fifo")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(read.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(read.get(), want);
  struct stat st {};
  ASSERT_EQ(lstat(path("out.fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced by a file";
}

// `( echo BEFORE; moegrad grad-x ... --out /dev/stdout; echo AFTER ) > log`
// and `... >> log`: the output goes through the descriptor the caller
// redirected, at its offset or appended, as the shell's echo does, and log
// stays the same file. Every name of that file counts: /dev/stdout,
// /proc/self/fd/1, its own path, and /dev/fd/N for a descriptor the command
// inherited other than stdout.
TEST_F(OutputPathTest, AFileTheCommandHoldsOpenIsWrittenThroughItsDescriptor) {
  const std::string want = plain_output();
  const std::set<std::string> files = listing();
  for (const bool append : {false, true}) {
    for (const std::string via : {"/dev/stdout", "/proc/self/fd/1", "own path", "/dev/fd/N"}) {
      const std::string what = via + (append ? " >> log" : " > log");
      write_file("log", "PREVIOUS\n");
      // Not O_CLOEXEC: the command inherits it, for /dev/fd/N.
      const int fd = open(path("log").c_str(), O_WRONLY | (append ? O_APPEND : O_TRUNC));
      ASSERT_GE(fd, 0);
      struct stat before {};
      ASSERT_EQ(fstat(fd, &before), 0);
      if (!append) {
        ASSERT_EQ(write(fd, "BEFORE\n", 7), 7);
      }
      std::string out = via;
      RunOptions options{.stdout_fd = fd};
      if (via == "own path") out = path("log");
      if (via == "/dev/fd/N") {  // stdout elsewhere: log is only the inherited fd
        out = "/dev/fd/" + std::to_string(fd);
        options = {};
      }
      const RunResult r = run_moegrad(args(p_, e_, out), options);
      EXPECT_EQ(r.exit_code, 0) << what << ": " << r.err;
      EXPECT_EQ(write(fd, "AFTER\n", 6), 6);
      close(fd);
      EXPECT_EQ(read_file("log"), (append ? "PREVIOUS\n" : "BEFORE\n") + want + "AFTER\n") << what;
      struct stat after {};
      ASSERT_EQ(stat(path("log").c_str(), &after), 0);
      EXPECT_EQ(after.st_ino, before.st_ino) << what << ": log was replaced";
      std::set<std::string> expected = files;
      expected.insert("log");
      EXPECT_EQ(listing(), expected) << what << ": a temp file was left behind";
    }
  }
}

// `moegrad grad-x ... --out /dev/stdout | consumer` still streams into the pipe.
TEST_F(OutputPathTest, StandardOutputIntoAPipeIsWrittenInPlace) {
  const std::string want = plain_output();
  int ends[2];
  ASSERT_EQ(pipe2(ends, O_CLOEXEC), 0);
  auto read = std::async(std::launch::async, [fd = ends[0]] {
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    close(fd);
    return got;
  });
  const RunResult r = run_moegrad(args(p_, e_, "/dev/stdout"), RunOptions{.stdout_fd = ends[1]});
  close(ends[1]);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(read.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(read.get(), want);
}

// rename() replaces a file whatever its mode; `echo x > ro.npy` and
// numpy.save refuse a read-only one, and so must grad-x, before any work.
// Root passes every permission check, so as root the command runs as
// nobody, in a directory nobody owns: the refusal is then tested, not
// skipped. A first run shows that user can write a new output there.
TEST_F(OutputPathTest, AReadOnlyOutputIsRefusedAndKept) {
  write_file("ro.npy", "old");
  ASSERT_EQ(chmod(path("ro.npy").c_str(), 0444), 0);
  RunOptions as;
  if (geteuid() == 0) {
    as.user = hand_the_directory_to_nobody();
    if (!as.user) GTEST_SKIP() << "cannot run the command as nobody in the test directory";
  }
  const RunResult control = run_moegrad(args(p_, e_, path("new.npy")), as);
  ASSERT_EQ(control.exit_code, 0) << "this user cannot write here at all: " << control.err;
  expect_error(args(p_, e_, path("ro.npy")), 1, path("ro.npy") + ": cannot be overwritten: Permission denied", as);
  EXPECT_EQ(read_file("ro.npy"), "old");
  struct stat st {};
  ASSERT_EQ(stat(path("ro.npy").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
}

// Replacing another user's file keeps its group where the writer belongs to
// it, as a shell redirection (which writes in place) keeps it: a file shared
// through its group stays shared. Where the group or owner is not kept, the
// old group's members and the old owner fall into the remaining classes: no
// class may then give anyone more than they had, and set-id bits go. Here
// root owns the files and the command runs as nobody.
TEST_F(OutputPathTest, AnotherUsersFileKeepsItsGroupOrGrantsNoOneMore) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to own the files and run the command as another user";
  const std::string want = plain_output();
  const std::optional<std::pair<uid_t, gid_t>> nobody = hand_the_directory_to_nobody();
  if (!nobody) GTEST_SKIP() << "cannot run the command as nobody in the test directory";
  constexpr gid_t kTeam = 4242;  // nobody's only where the run says so
  ASSERT_NE(nobody->second, kTeam);
  struct Case {
    const char* what;
    mode_t before;
    std::vector<gid_t> groups;  // nobody's supplementary groups
    gid_t group_after;
    mode_t after;
  };
  const Case cases[] = {
      // A member of the group: root:team stays team, its bits stay.
      {"a member of the group", 0660, {kTeam}, kTeam, 0660},
      // Not a member, writing through "other": the new group (nobody's)
      // gets group & other = w, and so does other; the old owner's rw
      // bounds both.
      {"group rw, other w", 0662, {}, nobody->second, 0622},
      // The team was denied; as "other" now, it must stay denied.
      {"a group denied what others may", 0606, {}, nobody->second, 0600},
      // Set-user-id and set-group-id go with root and the team.
      {"set-id bits", 06777, {}, nobody->second, 0777},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    write_file("out.npy", "old");
    ASSERT_EQ(chown(path("out.npy").c_str(), 0, kTeam), 0);
    ASSERT_EQ(chmod(path("out.npy").c_str(), c.before), 0);
    const RunResult r = run_moegrad(args(p_, e_, path("out.npy")), RunOptions{.user = nobody, .groups = c.groups});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(read_file("out.npy"), want);
    struct stat st {};
    ASSERT_EQ(stat(path("out.npy").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, nobody->first);
    EXPECT_EQ(st.st_gid, c.group_after);
    EXPECT_EQ(st.st_mode & 07777, c.after) << std::oct << "0" << (st.st_mode & 07777) << " from 0" << c.before;
  }
}

// NAME_MAX is the limit on the output's name, not on that name plus the
// temp file's suffix.
TEST_F(OutputPathTest, ANameAsLongAsTheFileSystemAllowsIsWritten) {
  const std::string want = plain_output();
  const long name_max = pathconf(dir().c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 4);
  const std::string name = std::string(static_cast<std::size_t>(name_max) - 4, 'a') + ".npy";
  const RunResult r = run_moegrad(args(p_, e_, path(name)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(name), want);
  EXPECT_EQ(listing(), (std::set<std::string>{"gy.npy", "w.npy", "idx.npy", "gl.npy", "plain.npy", name}));
}

// One byte longer, and the name cannot be created: refused before the work
// (the temp file's name is shortened to fit, so only the final rename would
// find out), leaving nothing behind.
TEST_F(OutputPathTest, ANameLongerThanTheFileSystemAllowsIsRefusedFirst) {
  const long name_max = pathconf(dir().c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 4);
  const std::string name = std::string(static_cast<std::size_t>(name_max) - 3, 'a') + ".npy";
  expect_error(args(p_, e_, path(name)), 1,
               path(name) + ": the file name is " + std::to_string(name_max + 1) + " bytes, more than the " +
                   std::to_string(name_max) + " that " + dir().string() + " allows");
  EXPECT_EQ(listing(), (std::set<std::string>{"gy.npy", "w.npy", "idx.npy", "gl.npy"}));
}

TEST_F(OutputPathTest, AFifoInputIsRefusedWithoutWaitingForAWriter) {
  ASSERT_EQ(mkfifo(path("w.fifo").c_str(), 0600), 0);
  std::vector<std::string> a = args(p_, e_);
  a[std::find(a.begin(), a.end(), "--weight") - a.begin() + 1] = path("w.fifo");
  std::promise<void> finished;
  // Should grad-x block in open(), a writer arriving after 20 s releases it
  // and the test fails instead of hanging.
  std::thread watchdog([&, done = finished.get_future()] {
    if (done.wait_for(20s) == std::future_status::ready) return;
    const int fd = open(path("w.fifo").c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) close(fd);
  });
  const auto start = std::chrono::steady_clock::now();
  expect_error(a, 1, "w.fifo: not a regular file");
  finished.set_value();
  watchdog.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s) << "grad-x waited for a writer";
}

// An --out that is an input, by its own path or through a link, would have
// replaced that input with grad_x; it is refused (a usage error) and every
// file is left as it was.
TEST_F(OutputPathTest, AnInputAsTheOutputIsRefusedAndKept) {
  const std::vector<std::string> a = args(p_, e_);
  for (const char* flag : {"--grad-y", "--weight", "--row-idx", "--group-list"}) {
    const std::string input = a[std::find(a.begin(), a.end(), flag) - a.begin() + 1];
    const std::string before = read_file(std::filesystem::path(input).filename().string());
    expect_error(args(p_, e_, input), 2, std::string("is the ") + flag + " input; write grad_x to another file");
    EXPECT_EQ(read_file(std::filesystem::path(input).filename().string()), before) << flag;
  }
  std::filesystem::create_symlink("w.npy", dir() / "w_link.npy");
  const std::string before = read_file("w.npy");
  expect_error(args(p_, e_, path("w_link.npy")), 2, "is the --weight input (" + path("w.npy") + ")");
  EXPECT_EQ(read_file("w.npy"), before);
  std::vector<std::string> leftovers;
  for (const auto& entry : std::filesystem::directory_iterator(dir()))
    if (entry.path().filename().string().find("moegrad-tmp") != std::string::npos)
      leftovers.push_back(entry.path().filename());
  EXPECT_TRUE(leftovers.empty()) << leftovers.front();
}

// Under `ulimit -f`, a write past the limit raises SIGXFSZ, whose default
// action ends the process silently, leaving the temp file. The command
// ignores it, so the write fails (EFBIG) like any other: one error line,
// the old output kept, no temp file. The limit leaves room for the error
// line on stderr (a file here) but not for the 16 KiB of grad_x.
TEST_F(GradXTest, AWritePastTheFileSizeLimitIsOneErrorLineAndLeavesTheOldOutput) {
  const MoeProblem p = make_problem(64, 2, 4, 64, 8, 4);
  const Encoding e;
  write_problem(p, e);
  write_file("dx.npy", "old");
  expect_error(args(p, e, path("dx.npy")), 1, path("dx.npy") + ": write failed: File too large",
               RunOptions{.file_size_bytes = 4096});
  EXPECT_EQ(read_file("dx.npy"), "old");
}

// A run long enough to be interrupted: the scalar path, one thread, 4.3
// GFLOP. Waits until its temp file exists (the output is being made).
class InterruptTest : public GradXTest {
 protected:
  void SetUp() override {
    GradXTest::SetUp();
    write_problem(p_, e_);
    before_ = listing();
    ASSERT_EQ(setenv("MOEGRAD_ISA", "scalar", 1), 0);
  }
  void TearDown() override {
    unsetenv("MOEGRAD_ISA");
    GradXTest::TearDown();
  }
  std::vector<std::string> slow_args(const std::string& out = "dx.npy") const {
    std::vector<std::string> a = args(p_, e_, out);
    a.insert(a.end(), {"--threads", "1"});
    return a;
  }
  bool temp_file_appears() const {
    for (auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until;) {
      for (const std::string& name : listing())
        if (name.find(".moegrad-tmp-") != std::string::npos) return true;
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }

  const MoeProblem p_ = make_problem(1024, 2, 2, 1024, 1024, 3);
  const Encoding e_;
  std::set<std::string> before_;
};

TEST_F(InterruptTest, SigtermLeavesNoTempFile) {
  Running run(slow_args());
  ASSERT_TRUE(temp_file_appears()) << "grad-x finished or failed before it could be interrupted";
  ASSERT_EQ(kill(run.pid(), SIGTERM), 0);
  const RunResult r = run.wait();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_EQ(listing(), before_) << "a temp file or an output was left behind";
}

// Any signal whose default action ends the process, not only the usual
// three: here a user signal and a timer's (SIGXCPU from `ulimit -t` too,
// but it and SIGQUIT would leave a core file).
TEST_F(InterruptTest, OtherTerminatingSignalsLeaveNoTempFile) {
  for (const int sig : {SIGUSR1, SIGALRM}) {
    Running run(slow_args());
    ASSERT_TRUE(temp_file_appears()) << "grad-x finished or failed before it could be interrupted";
    ASSERT_EQ(kill(run.pid(), sig), 0);
    const RunResult r = run.wait();
    EXPECT_EQ(r.exit_code, 128 + sig) << r.err;
    EXPECT_EQ(listing(), before_) << "signal " << sig << ": a temp file or an output was left behind";
  }
}

// As PID 1 of a PID namespace (a container without an init) the kernel
// drops a signal the process sends itself at its default action, so the
// handler's re-raise does nothing there: the handler must end the process
// itself, not return to a computation whose temp file it has removed.
TEST_F(InterruptTest, SigtermEndsTheInitOfAPidNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  const pid_t probe = fork();
  if (probe == 0) _exit(unshare(CLONE_NEWPID) == 0 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(probe, &status, 0), probe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) GTEST_SKIP() << "cannot make a PID namespace here";
  Running run(slow_args(), RunOptions{.own_pid_namespace = true});
  ASSERT_TRUE(temp_file_appears()) << "grad-x finished or failed before it could be interrupted";
  const int init = first_child_of(run.pid());  // it made the temp file: it exists
  if (init <= 0) GTEST_SKIP() << "cannot find the command's process (no /proc/PID/task/PID/children)";
  ASSERT_EQ(kill(init, SIGTERM), 0);
  const std::optional<RunResult> r = run.wait_for(30s);
  ASSERT_TRUE(r) << "still running 30 s after SIGTERM";
  EXPECT_EQ(r->exit_code, 128 + SIGTERM) << r->err;
  EXPECT_EQ(listing(), before_) << "a temp file or an output was left behind";
}

// A name too long to take the temp suffix gets a shortened temp name, which
// the signal handler still removes.
TEST_F(InterruptTest, SigtermLeavesNoTempFileForALongOutputName) {
  const long name_max = pathconf(dir().c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 4);
  Running run(slow_args(std::string(static_cast<std::size_t>(name_max) - 4, 'a') + ".npy"));
  ASSERT_TRUE(temp_file_appears()) << "grad-x finished or failed before it could be interrupted";
  ASSERT_EQ(kill(run.pid(), SIGTERM), 0);
  const RunResult r = run.wait();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_EQ(listing(), before_) << "a temp file or an output was left behind";
}

TEST_F(InterruptTest, AnInputTruncatedWhileReadIsOneErrorLine) {
  Running run(slow_args());
  ASSERT_TRUE(temp_file_appears()) << "grad-x finished or failed before the input could be truncated";
  std::this_thread::sleep_for(300ms);  // the inputs are mapped by now, the GEMM is running
  std::filesystem::resize_file(dir() / "gy.npy", 4096);
  const RunResult r = run.wait();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(r.err.starts_with("moegrad: error: ")) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not exactly one line: " << r.err;
  EXPECT_NE(r.err.find("SIGBUS"), std::string::npos) << r.err;
  EXPECT_EQ(listing(), before_) << "a temp file or an output was left behind";
}

// With many workers, several fault on the truncated mapping at once. The
// handler of the first must end the process, not a second fault (which once
// found SIGBUS reset to its default action and dumped core, sometimes before
// the temp file was removed). A race, so it is run until a dozen runs have
// faulted; a run that finished before the truncation (many fast cores)
// shortens the wait before the next.
TEST_F(InterruptTest, AnInputTruncatedUnderManyThreadsIsOneErrorLine) {
  int faulted = 0;
  auto wait = 200ms;
  for (int attempt = 0; attempt < 40 && faulted < 12; ++attempt) {
    write_problem(p_, e_);  // gy.npy whole again
    std::vector<std::string> a = args(p_, e_);
    a.insert(a.end(), {"--threads", "8"});
    Running run(a);
    ASSERT_TRUE(temp_file_appears()) << "grad-x finished or failed before the input could be truncated";
    std::this_thread::sleep_for(wait);
    std::filesystem::resize_file(dir() / "gy.npy", 4096);
    const RunResult r = run.wait();
    if (r.exit_code == 0) {
      std::filesystem::remove(dir() / "dx.npy");
      wait = std::max<std::chrono::milliseconds>(wait / 2, 20ms);
      continue;
    }
    ASSERT_EQ(r.exit_code, 1) << "attempt " << attempt << ": " << r.err;
    ASSERT_EQ(r.err.find('\n'), r.err.size() - 1) << "not exactly one line: " << r.err;
    ASSERT_NE(r.err.find("SIGBUS"), std::string::npos) << r.err;
    ASSERT_EQ(listing(), before_) << "a temp file or an output was left behind";
    ++faulted;
  }
  EXPECT_EQ(faulted, 12) << "too few runs were still reading when their input was truncated";
}

}  // namespace
}  // namespace moegrad::cli_test
