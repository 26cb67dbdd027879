// Running the library from tests: contexts, ISA parameters, workspace
// handling, and environment variables that are restored afterwards.
#pragma once

#include <moegrad/moegrad.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "problem.h"

namespace mgt {

// The test's own names for the ISA paths (not the library's strings).
const char* isa_label(moegrad_isa isa);
// SCALAR, AVX2, AVX512: the paths a test is parameterised over.
std::vector<moegrad_isa> explicit_isas();
// The best path moegrad_isa_available reports.
moegrad_isa fastest_isa();

// In a test body or SetUp: skip (not pass) when the CPU lacks the path.
#define MGT_SKIP_UNLESS_AVAILABLE(isa)                                                  \
  do {                                                                                  \
    if (!moegrad_isa_available(isa))                                                    \
      GTEST_SKIP() << "ISA " << ::mgt::isa_label(isa) << " is not available on this CPU"; \
  } while (0)

struct ContextDeleter {
  void operator()(moegrad_context* c) const { moegrad_context_destroy(c); }
};
using ContextPtr = std::unique_ptr<moegrad_context, ContextDeleter>;
struct ExecutorDeleter {
  void operator()(moegrad_executor* e) const { moegrad_executor_destroy(e); }
};
using ExecutorPtr = std::unique_ptr<moegrad_executor, ExecutorDeleter>;

// A context with the given settings (AUTO / 0: leave the default). Throws
// std::runtime_error naming the status and message if the library refuses.
ContextPtr make_context(moegrad_isa isa = MOEGRAD_ISA_AUTO, int32_t threads = 0, bool fast_bf16 = false);

struct RunOptions {
  moegrad_isa isa = MOEGRAD_ISA_AUTO;
  int32_t threads = 0;
  bool fast_bf16 = false;
  size_t workspace_misalign = 0;          // workspace pointer = 64-aligned base + this
  unsigned char workspace_fill = 0xA5;    // garbage the workspace starts with
  bool one_shot = false;                  // moegrad_grad_x_run instead of the two phases
  std::string describe() const;
};

struct Outcome {
  moegrad_status status = MOEGRAD_STATUS_SUCCESS;
  std::string phase;    // "plan", "run" or "one-shot": where it stopped
  std::string message;  // moegrad_last_error_message() after a failure
  size_t workspace_bytes = 0;
  bool ok() const { return status == MOEGRAD_STATUS_SUCCESS; }
  std::string describe() const;
};

// Base of the tests parameterised over the ISA path: skipped (not passed)
// where the CPU lacks it. options() runs on that path.
class IsaTest : public ::testing::TestWithParam<moegrad_isa> {
 protected:
  void SetUp() override { MGT_SKIP_UNLESS_AVAILABLE(GetParam()); }
  RunOptions options(int32_t threads = 0) const { return {.isa = GetParam(), .threads = threads}; }
};
std::string isa_param_name(const ::testing::TestParamInfo<moegrad_isa>& info);

// Plans and runs one call on ctx (nullptr: the library's default context).
Outcome run_call(const moegrad_grad_x_args& args, const moegrad_context* ctx, const RunOptions& opt = {});
// The same on a fresh context made from opt.
Outcome run_call(const moegrad_grad_x_args& args, const RunOptions& opt = {});

// Runs the problem into a fresh sentinel-filled grad_x and returns it
// row-major. A failed call or a write outside grad_x's elements is a test
// failure (ADD_FAILURE). *outcome (if given) receives the call's outcome.
Floats compute(const Problem& p, const RunOptions& opt = {}, Outcome* outcome = nullptr);

// "<problem> | isa=.. threads=.." for failure messages.
std::string describe(const Problem& p, const RunOptions& opt);

// Sets (value != nullopt) or unsets an environment variable; restores the
// previous state on destruction.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The AMD family the drivers' speed rules follow, for the scope
// (runtime::tuning_amd_family): 0 is any other vendor, 0x19 a Zen 3/4, 0x1a
// a Zen 5. Each rule's code then runs on any CPU with the ISA.
class ScopedTuningFamily {
 public:
  explicit ScopedTuningFamily(int family);
  ~ScopedTuningFamily();
  ScopedTuningFamily(const ScopedTuningFamily&) = delete;
  ScopedTuningFamily& operator=(const ScopedTuningFamily&) = delete;
};

// The families whose rules differ, for tests to loop over.
inline constexpr int kTuningFamilies[] = {0, 0x19, 0x1a};

}  // namespace mgt
