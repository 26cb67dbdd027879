// Runs the moegrad binary as a separate process (posix_spawn), capturing exit
// status, stdout and stderr, and gives each test a scratch directory.
#pragma once

#include <gtest/gtest.h>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scratch_dir.h"

namespace moegrad::cli_test {

struct RunResult {
  int exit_code = -1;  // 128 + signal if killed by a signal
  std::string out;
  std::string err;
};

struct RunOptions {
  // Where the command's standard output goes instead of being captured: a
  // path opened for writing (e.g. "/dev/full"), or a descriptor of the test's
  // that it shares, offset and O_APPEND included, as after a shell
  // redirection.
  const char* stdout_path = nullptr;
  int stdout_fd = -1;
  // Runs the command as this user and group (the test must be root): root
  // passes every permission check that a test may be about.
  std::optional<std::pair<uid_t, gid_t>> user = std::nullopt;
  // With `user`: its supplementary groups (none by default).
  std::vector<gid_t> groups = {};
  // Caps the command's address space (RLIMIT_AS), so an allocation too
  // large for it fails as on a machine without that much memory.
  std::optional<unsigned long long> address_space_bytes = std::nullopt;
  // Caps the size of any file the command writes (RLIMIT_FSIZE, `ulimit -f`)
  // with SIGXFSZ at its default action, which ends the process, unless the
  // command itself changes it: this test's own disposition is not inherited.
  std::optional<unsigned long long> file_size_bytes = std::nullopt;
  // Caps the command's data (RLIMIT_DATA: its private writable memory; not
  // what it maps without access), so that memory it asks for beyond it is
  // refused as on a smaller machine (but not under qemu-user, which ignores
  // the limit).
  std::optional<unsigned long long> data_bytes = std::nullopt;
  // Capabilities the command starts without (the test must be root): taken
  // out of the bounding set before exec, as a container that drops them.
  std::vector<int> dropped_capabilities = {};
  // Runs the command as PID 1 of a new PID namespace (the test must be
  // root), as in a container without an init. Running::pid() is then a
  // process that waits for it and exits as it did (128 + signal if killed);
  // first_child_of() finds the command itself.
  bool own_pid_namespace = false;
};

RunResult run_moegrad(const std::vector<std::string>& args, const RunOptions& options = {});
// The first child process of `pid` (/proc/PID/task/PID/children), or -1.
int first_child_of(int pid);
inline RunResult run_moegrad(const std::vector<std::string>& args, const char* stdout_path) {
  return run_moegrad(args, RunOptions{.stdout_path = stdout_path});
}

// The same, started in the background: wait() collects it.
class Running {
 public:
  explicit Running(const std::vector<std::string>& args, const RunOptions& options = {});
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;
  ~Running();  // kills and reaps a command not waited for
  int pid() const { return pid_; }
  RunResult wait();
  // As wait(), or nothing if the command is still running after `timeout`.
  std::optional<RunResult> wait_for(std::chrono::milliseconds timeout);

 private:
  RunResult finish(int status);  // the result of a reaped command, `status` from waitpid

  int pid_ = -1;
  std::string out_path_, err_path_;
  bool captured_ = false;
};

// A fresh directory per test, removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  const std::filesystem::path& dir() const { return scratch_->path(); }
  std::string path(const std::string& name) const { return (dir() / name).string(); }
  void write_file(const std::string& name, const std::string& bytes) const;
  std::string read_file(const std::string& name) const { return scratch_->read(name); }
  std::set<std::string> listing() const { return scratch_->listing(); }

  // Asserts the error contract: non-zero `exit_code`, exactly one stderr line
  // starting "moegrad: error:" and containing `needle`, and no new file in
  // the directory (neither the output nor a temp file).
  void expect_error(const std::vector<std::string>& args, int exit_code, const std::string& needle,
                    const RunOptions& options = {});

  std::optional<test::ScratchDir> scratch_;
};

// MemAvailable from /proc/meminfo, read apart from the CLI's reader, or the
// memory cgroups' headroom where that is less; nullopt where neither can be
// read.
std::optional<uint64_t> mem_available_bytes();

}  // namespace moegrad::cli_test
