// moegrad: command-line front end. Dispatches to a subcommand and turns every
// failure into exactly one "moegrad: error: ..." line on stderr and a
// documented exit status, because other tools drive this binary.
#include <moegrad/moegrad.h>

#include <cstdio>
#include <exception>
#include <moegrad/moegrad.hpp>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "cli_error.h"
#include "commands.h"
#include "signals.h"

namespace moegrad::cli {
namespace {

constexpr Command kCommands[] = {
    {"grad-x", "compute grad_x from .npy inputs, write it as .npy", cmd_grad_x},
    {"run", "the main job: random MoE layer, fused vs non-fused, timing, checks", cmd_run},
    {"bench", "the benchmark table", cmd_bench},
    {"info", "what the library sees here: CPU, ISA paths, threads, caches, oneDNN", cmd_info},
};

void print_help() {
  std::printf(
      "moegrad %s - fused, deterministic input gradient of a Mixture-of-Experts expert layer\n"
      "\n"
      "  grad_x[b, k] = sum over expanded rows i of token b (ascending i) of\n"
      "                 sum_n grad_y[i, n] * weight[g(i), k, n]\n"
      "\n"
      "Usage: moegrad <command> [flags]    (moegrad <command> --help for its flags)\n"
      "       moegrad --help | help [command] | --version\n"
      "\n"
      "Commands:\n",
      moegrad_version());
  for (const Command& c : kCommands) {
    std::printf("  %-8.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::printf(
      "\n"
      "Environment (read when a context is created; 'moegrad info' shows the result):\n"
      "  MOEGRAD_NUM_THREADS=N, MOEGRAD_ISA=auto|scalar|avx2|avx512,\n"
      "  MOEGRAD_ENGINE=auto|packed|rowvec, MOEGRAD_L1D_BYTES=B, MOEGRAD_L2_BYTES=B\n"
      "\n"
      "Exit status: 0 success; 1 runtime or data error (unreadable or invalid\n"
      "input, a library error, a failed check); 2 usage error (unknown command or\n"
      "flag, missing flag, malformed or out-of-range value). Every error prints one\n"
      "line on stderr starting 'moegrad: error:'; grad-x then writes no output\n"
      "(nor temp file), and an existing output file is left as it was; only a\n"
      "write that fails while it rewrites a file in place can leave part of one.\n");
}

// Messages must stay on one line: callers parse stderr line by line.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

int report(const std::string& message, int exit_code) {
  std::fflush(stdout);
  std::fprintf(stderr, "moegrad: error: %s\n", one_line(message).c_str());
  return exit_code;
}

const Command& find_command(std::string_view name) {
  for (const Command& c : kCommands) {
    if (c.name == name) return c;
  }
  usage_error("unknown command '" + std::string(name) + "' (see 'moegrad --help')");
}

int dispatch(int argc, char** argv) {
  if (argc < 2) usage_error("no command given (see 'moegrad --help')");
  const std::string_view name(argv[1]);
  auto is_help = [](std::string_view a) { return a == "--help" || a == "-h" || a == "help"; };
  if (is_help(name)) {
    // "help help" (or "help --help") asks about help itself: the general help
    // says what it is.
    if (argc == 2 || (argc == 3 && is_help(argv[2]))) {
      print_help();
      return kExitOk;
    }
    // "help run" is "run --help": asking about a command means its flags.
    if (argc > 3) usage_error("help takes one command name (see 'moegrad --help')");
    char help_flag[] = "--help";
    char* const args[] = {help_flag};
    return find_command(argv[2]).run(std::span<char* const>(args));
  }
  if (name == "--version") {
    if (argc > 2) usage_error("--version takes no arguments (see 'moegrad --help')");
    std::printf("moegrad %s\n", moegrad_version());
    return kExitOk;
  }
  return find_command(name).run(std::span<char* const>(argv + 2, argv + argc));
}

}  // namespace
}  // namespace moegrad::cli

int main(int argc, char** argv) {
  using namespace moegrad::cli;
  install_signal_handlers();
  try {
    const int status = dispatch(argc, argv);
    // A full disk or closed pipe on stdout is an error too, not a silent
    // success (the error flag also catches a failed flush by the command).
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) return report("cannot write to standard output", kExitFailure);
    return status;
  } catch (const CliError& e) {
    return report(e.what(), e.exit_code());
  } catch (const moegrad::Error& e) {
    // The library's message names the values; the status name names the
    // constraint in a form scripts can match.
    const std::string status = moegrad_status_string(e.status());
    const std::string name = status.substr(0, status.find(':'));
    const std::string message = e.what();
    return report(message.empty() ? status : message + " (" + name + ")", kExitFailure);
  } catch (const std::bad_alloc&) {
    return report("out of memory", kExitFailure);
  } catch (const std::system_error& e) {  // a thread or lock the OS refused: no bug of ours
    return report(std::string("the system refused a request: ") + e.what(), kExitFailure);
  } catch (const std::exception& e) {
    return report(std::string("internal error: ") + e.what(), kExitFailure);
  }
}
