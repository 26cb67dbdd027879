#include "cli_runner.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/cgroup_memory_headroom.h"

extern char** environ;

namespace moegrad::cli_test {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Running::Running(const std::vector<std::string>& args, const RunOptions& options) {
  // Output goes to files rather than pipes: no deadlock on large output and
  // no polling loop.
  char out_tmpl[] = "/tmp/moegrad_cli_test_outXXXXXX";
  char err_tmpl[] = "/tmp/moegrad_cli_test_errXXXXXX";
  int out_fd = -1;
  if (options.stdout_fd >= 0) {
    out_fd = fcntl(options.stdout_fd, F_DUPFD_CLOEXEC, 0);
  } else if (options.stdout_path != nullptr) {
    out_fd = open(options.stdout_path, O_WRONLY | O_CLOEXEC);
  } else {
    out_fd = mkstemp(out_tmpl);
    captured_ = true;
    out_path_ = out_tmpl;
  }
  const int err_fd = mkstemp(err_tmpl);
  err_path_ = err_tmpl;
  if (out_fd < 0 || err_fd < 0) {
    ADD_FAILURE() << "cannot open the command's output files";
    return;
  }
  std::vector<std::string> argv_storage{MOEGRAD_CLI_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = 0;
  int rc = 0;
  if (options.user || options.address_space_bytes || options.file_size_bytes || options.data_bytes ||
      !options.dropped_capabilities.empty() || options.own_pid_namespace) {
    // posix_spawn can change neither the user nor a limit: fork, set them,
    // exec. The child calls only async-signal-safe functions.
    pid = fork();
    if (pid == 0) {
      bool ok = dup2(out_fd, STDOUT_FILENO) >= 0 && dup2(err_fd, STDERR_FILENO) >= 0;
      if (ok && options.own_pid_namespace) {
        // The next child is the new namespace's PID 1; this one waits for it.
        ok = unshare(CLONE_NEWPID) == 0;
        const pid_t init = ok ? fork() : -1;
        if (init > 0) {
          int status = 0;
          while (waitpid(init, &status, 0) < 0 && errno == EINTR) {
          }
          _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        }
        ok = init == 0;
      }
      if (ok && options.address_space_bytes) {
        const struct rlimit cap = {*options.address_space_bytes, *options.address_space_bytes};
        ok = setrlimit(RLIMIT_AS, &cap) == 0;
      }
      if (ok && options.data_bytes) {
        const struct rlimit cap = {*options.data_bytes, *options.data_bytes};
        ok = setrlimit(RLIMIT_DATA, &cap) == 0;
      }
      for (int capability : options.dropped_capabilities)
        ok = ok && prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) == 0;
      if (ok && options.file_size_bytes) {
        const struct rlimit cap = {*options.file_size_bytes, *options.file_size_bytes};
        struct sigaction default_action {};
        default_action.sa_handler = SIG_DFL;
        ok = setrlimit(RLIMIT_FSIZE, &cap) == 0 && sigaction(SIGXFSZ, &default_action, nullptr) == 0;
      }
      if (ok && options.user) {
        const auto [uid, gid] = *options.user;
        ok = setgroups(options.groups.size(), options.groups.data()) == 0 && setgid(gid) == 0 && setuid(uid) == 0;
      }
      if (!ok) {
        constexpr char kMessage[] = "cli_test: cannot switch to the requested user, limit or capabilities\n";
        const ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
        (void)ignored;
        _exit(125);
      }
      execve(argv[0], argv.data(), environ);
      _exit(127);
    }
    rc = pid < 0 ? errno : 0;
  } else {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
    rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
  }
  close(out_fd);
  close(err_fd);
  if (rc != 0) {
    ADD_FAILURE() << "starting " << argv[0] << " failed: " << rc;
    return;
  }
  pid_ = pid;
}

std::optional<RunResult> Running::wait_for(std::chrono::milliseconds timeout) {
  for (const auto until = std::chrono::steady_clock::now() + timeout; pid_ > 0;) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_ || (done < 0 && errno != EINTR)) return finish(done == pid_ ? status : 0);
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return finish(0);
}

int first_child_of(int pid) {
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  int child = -1;
  return children >> child ? child : -1;
}

RunResult Running::wait() {
  int status = 0;
  if (pid_ > 0) {
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return finish(status);
}

RunResult Running::finish(int status) {
  RunResult r;
  if (pid_ > 0) r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  pid_ = -1;
  if (captured_) r.out = slurp(out_path_);
  r.err = slurp(err_path_);
  return r;
}

Running::~Running() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (!out_path_.empty()) unlink(out_path_.c_str());
  unlink(err_path_.c_str());
}

RunResult run_moegrad(const std::vector<std::string>& args, const RunOptions& options) {
  return Running(args, options).wait();
}

void CliTest::SetUp() {
  scratch_.emplace();
  ASSERT_FALSE(dir().empty()) << "no scratch directory";
}

void CliTest::TearDown() { scratch_.reset(); }

void CliTest::write_file(const std::string& name, const std::string& bytes) const {
  std::ofstream out(dir() / name, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << name;
}

void CliTest::expect_error(const std::vector<std::string>& args, int exit_code, const std::string& needle,
                           const RunOptions& options) {
  const std::set<std::string> before = listing();
  const RunResult r = run_moegrad(args, options);
  std::string cmd = "moegrad";
  for (const std::string& a : args) cmd += " " + a;
  EXPECT_EQ(r.exit_code, exit_code) << cmd << "\nstderr: " << r.err;
  EXPECT_TRUE(r.err.starts_with("moegrad: error: ")) << cmd << "\nstderr: " << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not exactly one line: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos)
      << cmd << "\nstderr: " << r.err << "\nexpected to mention: " << needle;
  EXPECT_EQ(listing(), before) << cmd << ": a file was left behind";
}

// MemAvailable from /proc/meminfo, read here apart from the CLI's reader,
// or the memory cgroups' headroom where that is less (its own tests:
// cgroup_memory_headroom_test); nullopt where neither can be read.
std::optional<uint64_t> mem_available_bytes() {
  std::optional<uint64_t> available = moegrad::runtime::cgroup_memory_headroom();
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return std::min(available.value_or(kib * 1024), kib * 1024);
  }
  return available;
}

}  // namespace moegrad::cli_test
