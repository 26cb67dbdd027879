// The command surface: help on every command, --version, dispatch errors,
// `moegrad bench` dispatch, `moegrad run` on a tiny shape, and `moegrad info`
// under chosen MOEGRAD_* variables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.h"
#include "json_syntax.h"
#include "runtime/cpu_features.h"

namespace moegrad::cli_test {
namespace {

TEST_F(CliTest, TopLevelHelp) {
  for (const char* flag : {"--help", "help", "-h"}) {
    const RunResult r = run_moegrad({flag});
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_EQ(r.err, "") << flag;
    for (const char* needle :
         {"Usage: moegrad <command>", "grad-x", "run", "bench", "info", "MOEGRAD_L2_BYTES", "Exit status",
          "2 usage error"}) {
      EXPECT_NE(r.out.find(needle), std::string::npos) << flag << " lacks " << needle;
    }
  }
}

TEST_F(CliTest, HelpOnEveryCommand) {
  for (const char* command : {"grad-x", "run", "bench", "info"}) {
    const RunResult r = run_moegrad({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_TRUE(r.out.starts_with(std::string("Usage: moegrad ") + command)) << r.out;
  }
  // Help wins even over an otherwise bad command line.
  EXPECT_EQ(run_moegrad({"grad-x", "--bogus", "--help"}).exit_code, 0);
  EXPECT_EQ(run_moegrad({"grad-x", "--batch", "3", "-h"}).exit_code, 0);
  EXPECT_EQ(run_moegrad({"bench", "--threads", "1", "-h"}).exit_code, 0);
  // Not where "-h" is a flag's value (a file may be named so).
  expect_error({"bench", "--threads", "-h"}, 2, "--threads '-h' is not an integer");
  const RunResult gx = run_moegrad({"grad-x", "--help"});
  for (const char* flag :
       {"--grad-y", "--weight", "--row-idx", "--group-list", "--batch", "--top-k", "--row-idx-type",
        "--group-list-type", "--bf16", "--threads", "--out"}) {
    EXPECT_NE(gx.out.find(flag), std::string::npos) << flag;
  }
}

// `moegrad help <command>` is `moegrad <command> --help`, as in git and pip.
TEST_F(CliTest, HelpNamingACommandIsThatCommandsHelp) {
  for (const char* command : {"grad-x", "run", "bench", "info"}) {
    const RunResult r = run_moegrad({"help", command});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    EXPECT_EQ(r.out, run_moegrad({command, "--help"}).out) << command;
  }
  expect_error({"help", "frobnicate"}, 2, "unknown command 'frobnicate'");
  expect_error({"help", "run", "bench"}, 2, "help takes one command");
  // The usage line offers `help [command]`; help about help, however it is
  // asked for, is the general help.
  const std::string general = run_moegrad({"--help"}).out;
  for (const char* how : {"help", "--help", "-h"}) {
    const RunResult help_help = run_moegrad({"help", how});
    EXPECT_EQ(help_help.exit_code, 0) << how << ": " << help_help.err;
    EXPECT_EQ(help_help.out, general) << how;
  }
}

// oneDNN's verbose mode prints to stdout, from inside the timed calls: bench
// turns it off, so --json stays one JSON array, and says so.
TEST_F(CliTest, BenchTurnsOnednnVerboseOff) {
  ASSERT_EQ(setenv("ONEDNN_VERBOSE", "1", 1), 0);
  const RunResult r =
      run_moegrad({"bench", "--shape", "16,2,4,64,32", "--dtype", "f32", "--reps", "1", "--threads", "1", "--json"});
  unsetenv("ONEDNN_VERBOSE");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (r.out.find("\"path\": \"onednn-nonfused\", \"ms\": null") != std::string::npos)
    GTEST_SKIP() << "no oneDNN module in this build: nothing prints";
  EXPECT_TRUE(r.out.starts_with("[") && r.out.ends_with("]\n")) << r.out;
  EXPECT_EQ(r.out.find("verbose"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("moegrad: note: ONEDNN_VERBOSE is ignored"), std::string::npos) << r.err;
}

TEST_F(CliTest, Version) {
  const RunResult r = run_moegrad({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "moegrad 0.1.0\n");
  expect_error({"--version", "extra"}, 2, "--version takes no arguments");
}

TEST_F(CliTest, DispatchErrors) {
  expect_error({}, 2, "no command given");
  expect_error({"frobnicate"}, 2, "unknown command 'frobnicate'");
  expect_error({"bench", "--shape", "nope"}, 2, "unknown --shape 'nope'");
  expect_error({"bench", "--reps", "0"}, 2, "(see 'moegrad bench --help')");  // quoted as the other commands' are
  // Numbers, but not five: the count is what is wrong, not the first number.
  expect_error({"bench", "--shape", "1,1,1,1"}, 2,
               "--shape 1,1,1,1: a custom shape needs 5 numbers batch,top_k,G,K,N, not 4");
  expect_error({"bench", "--shape", "64"}, 2, "a custom shape needs 5 numbers batch,top_k,G,K,N, not 1");
}

// A shape whose routing alone does not fit (2 GiB of address space here)
// says what did not fit, as the other buffers do, rather than a bare
// "std::bad_alloc". (`run` allocates its tensors first: see below.)
TEST_F(CliTest, ARoutingTooLargeForMemorySaysSo) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory needs more address space than the cap leaves";
#endif
  RunOptions capped;
  capped.address_space_bytes = 2ull << 30;
  const RunResult r = run_moegrad(
      {"bench", "--shape", "100000000,8,8,8,8", "--dtype", "f32", "--threads", "1", "--reps", "1"}, capped);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // 16 bytes a slot, 24 an expert.
  EXPECT_NE(r.err.find("out of memory: cannot allocate the routing of 800000000 slots to 8 experts "
                       "(12800000192 bytes)"),
            std::string::npos)
      << r.err;
  // The expert tables too: 4 slots, but 2^31 - 1 experts.
  const RunResult wide = run_moegrad(
      {"bench", "--shape", "4,1,2147483647,8,8", "--dtype", "f32", "--threads", "1", "--reps", "1"}, capped);
  EXPECT_EQ(wide.exit_code, 1) << wide.err;
  EXPECT_NE(wide.err.find("cannot allocate the routing of 4 slots to 2147483647 experts (51539607592 bytes)"),
            std::string::npos)
      << wide.err;
}

// A shape whose buffers together exceed the memory available is refused before
// anything is allocated: each allocation alone may succeed where Linux
// overcommits, and filling them got the process killed part-way, with no
// message. Here grad_y is 10^6 * 2^30 * 4 bytes (4 000 000 GiB), weight 4
// GiB, and the rest 21 bytes a row (routing, workspace), 48 the expert
// and 9 a token (two grad_x, workspace): 4000004.03 GiB. The workers'
// regions are checked once planned (cgroup_memory_test.sh).
TEST_F(CliTest, ARunBeyondMemAvailableIsRefusedBeforeAnythingIsAllocated) {
  if (!mem_available_bytes()) GTEST_SKIP() << "no MemAvailable in /proc/meminfo: the allocations report instead";
  const RunResult r = run_moegrad({"run", "--batch", "1000000", "--top-k", "1", "--experts", "1", "--k", "1", "--n",
                                   "1073741824", "--threads", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("run: this shape needs about 4000004.03 GiB at once (grad_y, weight, the routing, two "
                       "grad_x, the workspace's tables), more than the "),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.err.find(" GiB available (MemAvailable): choose a smaller shape") != std::string::npos ||
              r.err.find(" GiB available (the memory cgroup's limit less its use): choose a smaller shape") !=
                  std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  // 2^31 - 1 experts: 48 bytes each in the routing's and the workspace's
  // tables (96 GiB), weight 8 GiB, less a few bytes: 104.00 GiB.
  const RunResult experts = run_moegrad(
      {"run", "--batch", "1", "--top-k", "1", "--experts", "2147483647", "--k", "1", "--n", "1", "--threads", "1"});
  EXPECT_EQ(experts.exit_code, 1) << experts.err;
  EXPECT_NE(experts.err.find("run: this shape needs about 104.00 GiB at once"), std::string::npos) << experts.err;
}

// `run` allocates grad_y and weight before it builds the routing, so a shape
// they do not fit in fails at once, naming the tensor. Building the routing
// first took tens of GB (tables of G entries; of M) and, without a cap,
// ended in the OOM killer (G = 2^31 - 1) or a minute late (M = 8e8). Under
// a cap of 2 GiB of address space the tensor and the routing here each fail
// to allocate (4 GiB, and 3 or 4 GiB), so the tensor the message names
// shows which was attempted first. Together they fit in MemAvailable (the
// check before them, above) where it has 14 GiB: about 10 GiB each.
TEST_F(CliTest, ARunTooLargeForMemoryFailsOnItsTensorsBeforeBuildingItsRouting) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory needs more address space than the cap leaves";
#endif
  if (mem_available_bytes().value_or(0) < (14ull << 30)) GTEST_SKIP() << "less than 14 GiB MemAvailable";
  RunOptions capped;
  capped.address_space_bytes = 2ull << 30;
  // weight: 2^27 * 8 * 1 * 4 bytes (its routing: 3 tables of G 8-byte entries, 3 GiB).
  expect_error({"run", "--batch", "4", "--top-k", "1", "--experts", "134217728", "--k", "8", "--n", "1",
                "--threads", "1"},
               1, "out of memory: cannot allocate 4294967296 bytes for weight", capped);
  // grad_y: 2^28 * 4 * 4 bytes (its routing: 16 bytes a slot, 4 GiB).
  expect_error({"run", "--batch", "33554432", "--top-k", "8", "--experts", "8", "--k", "1", "--n", "4",
                "--threads", "1"},
               1, "out of memory: cannot allocate 4294967296 bytes for grad_y", capped);
}

TEST_F(CliTest, RunUsageErrors) {
  expect_error({"run", "--top-k", "5", "--experts", "4"}, 2, "--top-k 5 exceeds --experts 4");
  expect_error({"run", "--dtype", "f64"}, 2, "not one of f32, f16, bf16");
  expect_error({"run", "--k", "0"}, 2, "--k '0' is out of range");
  expect_error({"run", "--n", "3000000000"}, 2, "--n '3000000000' is out of range");
  expect_error({"run", "--threads", "4097"}, 2, "--threads '4097' is out of range (expected 1 to 4096)");
  // Refused before a routing of 2^31 rows (17 GB) is built.
  expect_error({"run", "--batch", "1073741824", "--top-k", "2", "--experts", "2", "--k", "1", "--n", "1"}, 2,
               "M = batch * top_k = 2147483648 exceeds 2147483647");
  expect_error({"run", "--experts", "2147483647", "--k", "2147483647", "--n", "2147483647"}, 2,
               "the size of weight overflows 64 bits");
}

// A failed write to standard output is an error, whichever command wrote.
TEST_F(CliTest, AFullStandardOutputFailsEveryCommand) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"bench", "--help"}, {"info"}, {"grad-x", "--help"},
        {"bench", "--shape", "8,1,2,8,8", "--dtype", "f32", "--threads", "1", "--reps", "1", "--json"}}) {
    const RunResult r = run_moegrad(args, "/dev/full");
    EXPECT_EQ(r.exit_code, 1) << args[0] << " " << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("cannot write to standard output"), std::string::npos) << r.err;
  }
}

const std::vector<std::string> kTinyRun = {"run",       "--batch",   "37",  "--top-k", "3",
                                           "--experts", "5",         "--k", "24",      "--n",
                                           "40",        "--threads", "2"};

TEST_F(CliTest, RunJsonIsOneObject) {
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    std::vector<std::string> args = kTinyRun;
    args.insert(args.end(), {"--dtype", dtype, "--json"});
    const RunResult r = run_moegrad(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_TRUE(is_single_json_object(r.out)) << r.out;
    for (const std::string& needle :
         std::vector<std::string>{"\"bitwise_identical\": true", "\"within_bound\": true",
                                  "\"passed\": true", "\"nonfused_identical\": true", "\"m\": 111",
                                  std::string("\"dtype\": \"") + dtype + "\""}) {
      EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " missing in\n" << r.out;
    }
  }
}

TEST_F(CliTest, RunHumanReport) {
  const RunResult r = run_moegrad(kTinyRun);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle :
       {"batch=37 top_k=3 experts=5 K=24 N=40 M=111", "GFLOP/s", "workspace", "4*M*K", "vs float64",
        "bitwise identical across thread counts (2 vs 1): yes"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " missing in\n" << r.out;
  }
}

// The bench command end to end on a tiny shape: one JSON array with the
// fused, non-fused and FMA-peak rows (timings are never asserted).
TEST_F(CliTest, BenchJsonOnTinyShape) {
  const RunResult r = run_moegrad({"bench", "--shape", "64,2,4,64,32", "--dtype", "f32", "--threads", "1",
                                   "--reps", "1", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.front(), '[') << r.out;
  for (const char* needle : {"\"path\": \"fused\"", "\"path\": \"nonfused\"", "\"path\": \"fma-peak\"",
                             "\"shape\": \"64,2,4,64,32\"", "\"workspace_bytes\""}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " missing in\n" << r.out;
  }
}

// Sets (or, with nullopt, unsets) MOEGRAD_* variables for the commands a
// test spawns, and restores them afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::optional<std::string>>> vars) {
    for (auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      set(name, value);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) set(name, value);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Names and values in the JSON may hold any byte (an environment variable's
// name): valid UTF-8 is written as it is, any other byte as U+FFFD, so the
// output stays UTF-8, as JSON must (RFC 8259).
TEST_F(CliTest, InfoJsonStaysUtf8WhateverTheEnvironmentHolds) {
  // The checker itself refuses what is not UTF-8.
  EXPECT_TRUE(is_single_json_object("{\"a\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}"));
  for (const char* bad : {"\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80"})
    EXPECT_FALSE(is_single_json_object(std::string("{\"a\": \"") + bad + "\"}")) << "accepted " << bad;

  const ScopedEnv env({{"MOEGRAD_\xff\xc3X", "1"},  // a stray byte, a truncated sequence
                       {"MOEGRAD_\xed\xa0\x80Y", "1"},  // an encoded surrogate, not UTF-8
                       {"MOEGRAD_\xc3\xa9T\xe2\x82\xac", "1"}});  // valid: é and €
  const RunResult json = run_moegrad({"info", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(is_single_json_object(json.out)) << json.out;
  for (const char* needle : {"\"MOEGRAD_\\ufffd\\ufffdX\": ", "\"MOEGRAD_\\ufffd\\ufffd\\ufffdY\": ",
                             "\"MOEGRAD_\xc3\xa9T\xe2\x82\xac\": "})
    EXPECT_NE(json.out.find(needle), std::string::npos) << needle << " missing in\n" << json.out;
}

// Every setting info reports is the one asked for through the environment.
TEST_F(CliTest, InfoReportsTheContextTheEnvironmentAsksFor) {
  const ScopedEnv env({{"MOEGRAD_NUM_THREADS", "3"},
                       {"MOEGRAD_ISA", "scalar"},
                       {"MOEGRAD_ENGINE", "packed"},
                       {"MOEGRAD_L1D_BYTES", "32768"},
                       {"MOEGRAD_L2_BYTES", "262144"},
                       {"MOEGRAD_ENGIN", "rowvec"},  // misspelled: reported, not read
                       {"MOEGRAD_COLOUR", "1"},
                       {"MOEGRAD_TSAN_SUITE_BUILD", "build"}});  // scripts/test.sh's: not reported
  const RunResult json = run_moegrad({"info", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.err, "");
  EXPECT_TRUE(is_single_json_object(json.out)) << json.out;
  for (const char* needle :
       {"\"version\": \"0.1.0\"", "\"isa\": \"scalar\"", "\"isa_available\": [\"scalar\"", "\"threads\": 3",
        "\"affinity_cpus\": ", "\"cgroup_cpu_limit\": ", "\"usable_cpus\": ", "\"memory_available_bytes\": ",
        "\"cgroup_memory_headroom_bytes\": ",
        "\"engine\": \"packed\"", "\"l1d_bytes\": 32768", "\"l2_bytes\": 262144", "\"MOEGRAD_ISA\": \"scalar\"",
        "\"MOEGRAD_L2_BYTES\": \"262144\"", "\"avx512_bf16\": ", "\"MOEGRAD_ENGIN\": \"MOEGRAD_ENGINE\"",
        "\"MOEGRAD_COLOUR\": null"}) {
    EXPECT_NE(json.out.find(needle), std::string::npos) << needle << " missing in\n" << json.out;
  }
  // oneDNN: a version, or null and the reason.
  const bool has_onednn = json.out.find("\"onednn\": \"oneDNN ") != std::string::npos;
  EXPECT_NE(json.out.find(has_onednn ? "\"onednn_unavailable\": null" : "\"onednn\": null"), std::string::npos)
      << json.out;

  const RunResult human = run_moegrad({"info"});
  EXPECT_EQ(human.exit_code, 0) << human.err;
  for (const char* needle :
       {"moegrad 0.1.0\n", "  isa        scalar (this CPU runs: scalar", "  threads    3\n",
        " in the affinity mask, ", " usable, the default without MOEGRAD_NUM_THREADS\n",
        "  caches     L1d 32 KiB, L2 256 KiB per core", "  engine     packed\n",
        "  env        MOEGRAD_NUM_THREADS=3 MOEGRAD_ISA=scalar MOEGRAD_ENGINE=packed MOEGRAD_L1D_BYTES=32768 "
        "MOEGRAD_L2_BYTES=262144\n",
        "  onednn     ", "  ignored    MOEGRAD_ENGIN: moegrad reads no such variable (MOEGRAD_ENGINE?)\n",
        "  ignored    MOEGRAD_COLOUR: moegrad reads no such variable\n"}) {
    EXPECT_NE(human.out.find(needle), std::string::npos) << needle << " missing in\n" << human.out;
  }
  EXPECT_EQ(json.out.find("MOEGRAD_TSAN_SUITE_BUILD"), std::string::npos) << json.out;
  EXPECT_EQ(human.out.find("MOEGRAD_TSAN_SUITE_BUILD"), std::string::npos) << human.out;
}

// A context forced to avx2 refuses the fast bf16 mode even where the CPU
// has AVX512_BF16: info must not just say "yes" there. Whether the CPU has
// it comes from the command's JSON: under qemu-user (scripts/test_cpus.sh)
// the command runs on the host CPU, not the emulated one this test sees.
TEST_F(CliTest, InfoSaysFastBf16RunsOnAvx512OnlyUnderAForcedAvx2) {
  if (!moegrad::runtime::cpu_features().avx2) GTEST_SKIP() << "no AVX2 here";
  const ScopedEnv env({{"MOEGRAD_ISA", std::optional<std::string>("avx2")}});
  const RunResult json = run_moegrad({"info", "--json"});
  const bool bf16 = json.out.find("\"avx512_bf16\": true") != std::string::npos;
  ASSERT_TRUE(bf16 || json.out.find("\"avx512_bf16\": false") != std::string::npos) << json.out;
  const RunResult r = run_moegrad({"info"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(bf16 ? "AVX512_BF16 for fast bf16: yes, on avx512 only)" : "AVX512_BF16 for fast bf16: no)"),
            std::string::npos)
      << r.out;
}

TEST_F(CliTest, InfoWithoutVariablesAndItsErrors) {
  const ScopedEnv env({{"MOEGRAD_NUM_THREADS", std::nullopt},
                       {"MOEGRAD_ISA", std::nullopt},
                       {"MOEGRAD_ENGINE", std::nullopt},
                       {"MOEGRAD_L1D_BYTES", std::nullopt},
                       {"MOEGRAD_L2_BYTES", std::nullopt}});
  const RunResult r = run_moegrad({"info"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  env        no MOEGRAD_* variable set\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  engine     auto\n"), std::string::npos) << r.out;
  expect_error({"info", "--verbose"}, 2, "unknown flag '--verbose'");
  {
    // A malformed variable fails info as it fails every context.
    const ScopedEnv bad({{"MOEGRAD_ISA", "bogus"}, {"MOEGRAD_L2_BYTES", std::nullopt}});
    expect_error({"info"}, 1, "MOEGRAD_ISA='bogus'");
  }
  const ScopedEnv too_small({{"MOEGRAD_ISA", std::nullopt}, {"MOEGRAD_L2_BYTES", "1024"}});
  expect_error({"info", "--json"}, 1, "MOEGRAD_L2_BYTES");
}

}  // namespace
}  // namespace moegrad::cli_test
