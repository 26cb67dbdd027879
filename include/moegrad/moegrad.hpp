// moegrad — thin C++ RAII layer over the C API in moegrad.h.
//
//   moegrad::Context ctx;                 // env defaults
//   ctx.set_num_threads(2);
//   moegrad::GradXExecutor ex(args, ctx); // validate + plan (throws moegrad::Error)
//   std::vector<unsigned char> ws(ex.workspace_bytes());   // <vector>
//   ex.run(ws.data(), ws.size(), ctx);
//
// or in one call: moegrad::grad_x(args, ctx); without ctx, a call runs on
// the library's default context (the C API's NULL).
#ifndef MOEGRAD_MOEGRAD_HPP_
#define MOEGRAD_MOEGRAD_HPP_

// These wrappers throw moegrad::Error and use C++14's library. moegrad.h is
// the C API, for any C or C++ program.
#if !defined(__cplusplus) || __cplusplus < 201402L
#error "moegrad.hpp needs C++14 or later; moegrad.h is the C API, usable from any C or C++"
#endif
#if !defined(__cpp_exceptions) && !defined(__EXCEPTIONS)
#error "moegrad.hpp reports errors as exceptions (moegrad::Error), which this build disables; use the C API in moegrad.h"
#endif

#include <moegrad/moegrad.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace moegrad {

// Carries the status and the library's one-line message.
class Error : public std::runtime_error {
 public:
  Error(moegrad_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  moegrad_status status() const noexcept { return status_; }

 private:
  moegrad_status status_;
};

inline void check(moegrad_status status) {
  if (status != MOEGRAD_STATUS_SUCCESS) throw Error(status, moegrad_last_error_message());
}

// The C API's plain queries, for code that uses only the wrappers.
inline const char* version() noexcept { return moegrad_version(); }
inline const char* status_string(moegrad_status status) noexcept { return moegrad_status_string(status); }
inline const char* isa_name(moegrad_isa isa) noexcept { return moegrad_isa_name(isa); }
inline bool isa_available(moegrad_isa isa) noexcept { return moegrad_isa_available(isa) != 0; }

// Owns a moegrad_context. A moved-from Context holds none (move assignment
// destroys the one it held), and a call given it runs on the default
// context, as the C API does for NULL.
class Context {
 public:
  Context() { check(moegrad_context_create(&ctx_)); }
  // Holds none: the library's default context, which every call without a
  // context shares (its settings come from the environment at its first
  // use; a setter or getter on this object throws NULL_POINTER).
  static Context default_context() noexcept { return Context(nullptr); }
  ~Context() { moegrad_context_destroy(ctx_); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  Context(Context&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}
  Context& operator=(Context&& other) noexcept {
    if (this != &other) {
      moegrad_context_destroy(ctx_);
      ctx_ = std::exchange(other.ctx_, nullptr);
    }
    return *this;
  }

  void set_num_threads(int32_t n) { check(moegrad_context_set_num_threads(ctx_, n)); }
  int32_t num_threads() const {
    int32_t n = 0;
    check(moegrad_context_get_num_threads(ctx_, &n));
    return n;
  }
  void set_isa(moegrad_isa isa) { check(moegrad_context_set_isa(ctx_, isa)); }
  moegrad_isa isa() const {
    moegrad_isa isa = MOEGRAD_ISA_AUTO;
    check(moegrad_context_get_isa(ctx_, &isa));
    return isa;
  }
  void set_fast_bf16(bool enable) { check(moegrad_context_set_fast_bf16(ctx_, enable ? 1 : 0)); }

  moegrad_context* get() noexcept { return ctx_; }
  const moegrad_context* get() const noexcept { return ctx_; }

 private:
  explicit Context(moegrad_context* ctx) noexcept : ctx_(ctx) {}
  moegrad_context* ctx_ = nullptr;
};

// A planned, single-use grad-x run. A moved-from executor holds no plan
// (workspace_bytes() 0; run throws NULL_POINTER).
class GradXExecutor {
 public:
  GradXExecutor(const moegrad_grad_x_args& args, const Context& ctx) {
    check(moegrad_grad_x_get_workspace_size(&args, ctx.get(), &workspace_bytes_, &ex_));
  }
  // Planned on the library's default context.
  explicit GradXExecutor(const moegrad_grad_x_args& args) : GradXExecutor(args, Context::default_context()) {}
  ~GradXExecutor() { moegrad_executor_destroy(ex_); }
  GradXExecutor(const GradXExecutor&) = delete;
  GradXExecutor& operator=(const GradXExecutor&) = delete;
  GradXExecutor(GradXExecutor&& other) noexcept
      : ex_(std::exchange(other.ex_, nullptr)), workspace_bytes_(std::exchange(other.workspace_bytes_, 0)) {}
  GradXExecutor& operator=(GradXExecutor&& other) noexcept {
    if (this != &other) {
      moegrad_executor_destroy(ex_);
      ex_ = std::exchange(other.ex_, nullptr);
      workspace_bytes_ = std::exchange(other.workspace_bytes_, 0);
    }
    return *this;
  }

  std::size_t workspace_bytes() const noexcept { return workspace_bytes_; }
  void run(void* workspace, std::size_t workspace_bytes, const Context& ctx = Context::default_context()) {
    check(moegrad_grad_x(workspace, workspace_bytes, ex_, ctx.get()));
  }

 private:
  moegrad_executor* ex_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

// One-shot: plan, allocate, run, free.
inline void grad_x(const moegrad_grad_x_args& args, const Context& ctx = Context::default_context()) {
  check(moegrad_grad_x_run(&args, ctx.get()));
}

}  // namespace moegrad

#endif  // MOEGRAD_MOEGRAD_HPP_
