// The subcommands. Adding one is a function in its own file plus one entry in
// kCommands (main.cpp); main owns dispatch, --help listing and error output.
#pragma once

#include <span>
#include <string_view>

namespace moegrad::cli {

// args: everything after the command name. Returns the exit status; errors
// are thrown as CliError / moegrad::Error and reported by main.
using CommandFn = int (*)(std::span<char* const> args);

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for "moegrad --help"
  CommandFn run;
};

int cmd_grad_x(std::span<char* const> args);
int cmd_run(std::span<char* const> args);
int cmd_bench(std::span<char* const> args);
int cmd_info(std::span<char* const> args);

}  // namespace moegrad::cli
