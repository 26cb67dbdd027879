// Calling the library the way an adversarial caller would: contexts cached
// per (ISA, threads), a workspace of *exactly* the reported size (so ASan
// catches any use beyond it) at any misalignment and pre-filled with garbage,
// and the API misuses of SPEC §4.9.
#pragma once

#include <moegrad/moegrad.h>
#include <moegrad/moegrad.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mgh {

// Executors stay raw (the C API), so every status can be observed.
using ExecutorPtr = std::unique_ptr<moegrad_executor, decltype(&moegrad_executor_destroy)>;
inline ExecutorPtr own(moegrad_executor* ex) { return ExecutorPtr(ex, moegrad_executor_destroy); }

// A new context (AUTO: the best ISA; threads 0: default; fast_bf16: the
// opt-in pair mode, which planning may refuse), through the public C++
// layer. Aborts with the library's message if it is refused: callers check
// moegrad_isa_available.
moegrad::Context make_context(moegrad_isa isa, int32_t threads, bool fast_bf16 = false);
// The same, created once per (isa, threads, mode, engine) and kept until
// exit (thread-safe). engine: "packed" or "rowvec" forces that engine
// (MOEGRAD_ENGINE, set while the context is made: create such contexts
// before other threads may read the environment); nullptr keeps the
// environment's choice.
const moegrad_context* shared_context(moegrad_isa isa, int32_t threads, bool fast_bf16 = false,
                                      const char* engine = nullptr);
// The ISAs this CPU runs, SCALAR first.
std::vector<moegrad_isa> available_isas();

// Heap block of exactly misalign + bytes, pattern-filled; ptr = block + misalign.
struct Workspace {
  std::unique_ptr<std::byte[]> block;
  void* ptr = nullptr;
  size_t bytes = 0;
};
Workspace make_workspace(size_t bytes, size_t misalign, const std::vector<uint8_t>& fill);

enum class Misuse : uint8_t {
  kNone,
  kNullArgs,           // get_workspace_size(NULL, ...)
  kNullSizeOut,        // workspace_bytes out-pointer NULL
  kNullExecutorOut,    // executor out-pointer NULL
  kNullExecutor,       // moegrad_grad_x(..., NULL executor, ...)
  kWorkspaceTooSmall,  // one byte less than reported
  kNullWorkspace,      // NULL workspace with the reported size
  kRunTwice,           // a second run of the same executor
  kCount
};
const char* misuse_name(Misuse m);
// The status a misuse must produce.
moegrad_status misuse_status(Misuse m);

struct RunOptions {
  const moegrad_context* plan_ctx = nullptr;  // NULL: the library's default context
  const moegrad_context* run_ctx = nullptr;   // NULL: the library's default context
  size_t misalign = 0;
  std::vector<uint8_t> ws_fill = {0xA5};
  Misuse misuse = Misuse::kNone;
};

struct RunResult {
  moegrad_status status = MOEGRAD_STATUS_SUCCESS;
  const char* phase = "";     // "plan", "run" or "rerun": where the status came from
  std::string message;        // moegrad_last_error_message() after a failure
  size_t workspace_bytes = 0;
  bool first_run_ok = false;  // kRunTwice: the first run succeeded
  bool ok() const { return status == MOEGRAD_STATUS_SUCCESS; }
  std::string describe() const;
};

// Plan + run (with the misuse, if any). Executors are always destroyed.
RunResult run_grad_x(const moegrad_grad_x_args* args, const RunOptions& opt);

}  // namespace mgh
