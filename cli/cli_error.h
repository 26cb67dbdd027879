// Every failure in the CLI is an exception that carries its exit status, so all
// paths end in main's single handler: one "moegrad: error:" line, destructors
// run (temp files are removed), and the status tells scripts what went wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace moegrad::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // runtime / data / library errors
inline constexpr int kExitUsage = 2;    // the command line itself is wrong

class CliError : public std::runtime_error {
 public:
  CliError(int exit_code, const std::string& message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

[[noreturn]] inline void usage_error(const std::string& message) {
  throw CliError(kExitUsage, message);
}

[[noreturn]] inline void data_error(const std::string& message) {
  throw CliError(kExitFailure, message);
}

}  // namespace moegrad::cli
