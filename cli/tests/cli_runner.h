// Runs the moegrad binary as a separate process (posix_spawn), capturing exit
// status, stdout and stderr, and gives each test a scratch directory.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace moegrad::cli_test {

struct RunResult {
  int exit_code = -1;  // 128 + signal if killed by a signal
  std::string out;
  std::string err;
};

// stdout_path: where the command's standard output goes instead of being
// captured (e.g. "/dev/full").
RunResult run_moegrad(const std::vector<std::string>& args, const char* stdout_path = nullptr);

// The same, started in the background: wait() collects it.
class Running {
 public:
  explicit Running(const std::vector<std::string>& args, const char* stdout_path = nullptr);
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;
  ~Running();  // kills and reaps a command not waited for
  int pid() const { return pid_; }
  RunResult wait();

 private:
  int pid_ = -1;
  std::string out_path_, err_path_;
  bool captured_ = false;
};

// A fresh directory per test, removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_file(const std::string& name, const std::string& bytes) const;
  std::string read_file(const std::string& name) const;
  std::set<std::string> listing() const;

  // Asserts the error contract: non-zero `exit_code`, exactly one stderr line
  // starting "moegrad: error:" and containing `needle`, and no new file in
  // the directory (neither the output nor a temp file).
  void expect_error(const std::vector<std::string>& args, int exit_code, const std::string& needle);

  std::filesystem::path dir_;
};

}  // namespace moegrad::cli_test
