#include "runner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "scoped_env.h"

namespace mgh {

moegrad::Context make_context(moegrad_isa isa, int32_t threads, bool fast_bf16) {
  try {
    moegrad::Context ctx;
    ctx.set_isa(isa);
    ctx.set_num_threads(threads);
    ctx.set_fast_bf16(fast_bf16);
    return ctx;
  } catch (const moegrad::Error& e) {
    std::fprintf(stderr, "mgh: context (isa %s, %d threads) refused: %s\n", moegrad_isa_name(isa), threads, e.what());
    std::abort();
  }
}

const moegrad_context* shared_context(moegrad_isa isa, int32_t threads, bool fast_bf16, const char* engine) {
  static std::mutex mutex;
  using Key = std::tuple<int, int32_t, bool, std::string>;
  static auto* cache = new std::map<Key, moegrad::Context>;  // never destroyed: used at exit
  std::lock_guard<std::mutex> lock(mutex);
  const Key key{static_cast<int>(isa), threads, fast_bf16, engine != nullptr ? engine : ""};
  auto it = cache->find(key);
  if (it == cache->end()) {
    std::optional<ScopedEnv> forced;
    if (engine != nullptr) forced.emplace("MOEGRAD_ENGINE", engine);
    it = cache->emplace(key, make_context(isa, threads, fast_bf16)).first;
  }
  return it->second.get();
}

std::vector<moegrad_isa> available_isas() {
  std::vector<moegrad_isa> out;
  for (moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512})
    if (moegrad_isa_available(isa)) out.push_back(isa);
  return out;
}

Workspace make_workspace(size_t bytes, size_t misalign, const std::vector<uint8_t>& fill) {
  Workspace w;
  const size_t total = misalign + bytes;
  w.block.reset(new std::byte[total == 0 ? 1 : total]);
  // The pattern once, then doubling copies (workspaces are up to megabytes).
  const size_t first = std::min(total, fill.empty() ? size_t{1} : fill.size());
  for (size_t i = 0; i < first; ++i) w.block[i] = static_cast<std::byte>(fill.empty() ? 0 : fill[i]);
  for (size_t done = first; done < total;) {
    const size_t n = std::min(done, total - done);
    std::memcpy(w.block.get() + done, w.block.get(), n - n % first);
    done += n - n % first;
    if (n < first) {  // a tail shorter than one period
      for (size_t i = done; i < total; ++i) w.block[i] = w.block[i - first];
      break;
    }
  }
  w.ptr = w.block.get() + misalign;
  w.bytes = bytes;
  return w;
}

const char* misuse_name(Misuse m) {
  switch (m) {
    case Misuse::kNone: return "none";
    case Misuse::kNullArgs: return "null-args";
    case Misuse::kNullSizeOut: return "null-size-out";
    case Misuse::kNullExecutorOut: return "null-executor-out";
    case Misuse::kNullExecutor: return "null-executor";
    case Misuse::kWorkspaceTooSmall: return "workspace-too-small";
    case Misuse::kNullWorkspace: return "null-workspace";
    case Misuse::kRunTwice: return "run-twice";
    case Misuse::kCount: break;
  }
  return "?";
}

moegrad_status misuse_status(Misuse m) {
  switch (m) {
    case Misuse::kNone: return MOEGRAD_STATUS_SUCCESS;
    case Misuse::kWorkspaceTooSmall: return MOEGRAD_STATUS_WORKSPACE_TOO_SMALL;
    case Misuse::kRunTwice: return MOEGRAD_STATUS_EXECUTOR_USED;
    default: return MOEGRAD_STATUS_NULL_POINTER;
  }
}

std::string RunResult::describe() const {
  std::string s = std::string(moegrad_status_string(status)) + " at " + phase;
  if (!message.empty()) s += " (\"" + message + "\")";
  return s + ", workspace " + std::to_string(workspace_bytes) + " bytes";
}

RunResult run_grad_x(const moegrad_grad_x_args* args, const RunOptions& opt) {
  RunResult r;
  auto failed = [&](moegrad_status s, const char* phase) {
    r.status = s;
    r.phase = phase;
    r.message = moegrad_last_error_message();
    return r;
  };
  size_t bytes = 12345;  // a failure must set it to 0, a success to the size
  moegrad_executor* raw = nullptr;
  moegrad_status s;
  switch (opt.misuse) {
    case Misuse::kNullArgs: s = moegrad_grad_x_get_workspace_size(nullptr, opt.plan_ctx, &bytes, &raw); break;
    case Misuse::kNullSizeOut: s = moegrad_grad_x_get_workspace_size(args, opt.plan_ctx, nullptr, &raw); break;
    case Misuse::kNullExecutorOut: s = moegrad_grad_x_get_workspace_size(args, opt.plan_ctx, &bytes, nullptr); break;
    default: s = moegrad_grad_x_get_workspace_size(args, opt.plan_ctx, &bytes, &raw); break;
  }
  ExecutorPtr ex = own(raw);
  if (s != MOEGRAD_STATUS_SUCCESS) {
    if (raw != nullptr) return failed(MOEGRAD_STATUS_INTERNAL, "plan (executor returned with a failure)");
    // moegrad.h: on failure *workspace_bytes is 0, set once both out-pointers
    // are known not to be NULL.
    if (opt.misuse != Misuse::kNullSizeOut && opt.misuse != Misuse::kNullExecutorOut && bytes != 0)
      return failed(MOEGRAD_STATUS_INTERNAL, "plan (a failure left *workspace_bytes nonzero)");
    return failed(s, "plan");
  }
  if (opt.misuse == Misuse::kNullArgs || opt.misuse == Misuse::kNullSizeOut ||
      opt.misuse == Misuse::kNullExecutorOut) {
    r.message = "get_workspace_size accepted a NULL argument";
    r.status = MOEGRAD_STATUS_INTERNAL;
    r.phase = "plan";
    return r;
  }
  r.workspace_bytes = bytes;
  const size_t given = opt.misuse == Misuse::kWorkspaceTooSmall && bytes > 0 ? bytes - 1 : bytes;
  Workspace ws = make_workspace(given, opt.misalign, opt.ws_fill);
  void* ptr = opt.misuse == Misuse::kNullWorkspace ? nullptr : ws.ptr;
  moegrad_executor* run_ex = opt.misuse == Misuse::kNullExecutor ? nullptr : ex.get();
  s = moegrad_grad_x(ptr, given, run_ex, opt.run_ctx);
  if (s != MOEGRAD_STATUS_SUCCESS) return failed(s, "run");
  if (opt.misuse == Misuse::kRunTwice) {
    r.first_run_ok = true;
    s = moegrad_grad_x(ptr, given, run_ex, opt.run_ctx);
    if (s != MOEGRAD_STATUS_SUCCESS) return failed(s, "rerun");
    r.phase = "rerun";
  } else {
    r.phase = "run";
  }
  return r;
}

}  // namespace mgh
