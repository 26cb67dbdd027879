#include "runner.h"

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "runtime/cpu_features.h"

namespace mgt {

const char* isa_label(moegrad_isa isa) {
  switch (isa) {
    case MOEGRAD_ISA_AUTO: return "auto";
    case MOEGRAD_ISA_SCALAR: return "scalar";
    case MOEGRAD_ISA_AVX2: return "avx2";
    case MOEGRAD_ISA_AVX512: return "avx512";
  }
  return "unknown";
}

std::vector<moegrad_isa> explicit_isas() { return {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}; }

std::string isa_param_name(const ::testing::TestParamInfo<moegrad_isa>& info) { return isa_label(info.param); }

moegrad_isa fastest_isa() {
  if (moegrad_isa_available(MOEGRAD_ISA_AVX512)) return MOEGRAD_ISA_AVX512;
  if (moegrad_isa_available(MOEGRAD_ISA_AVX2)) return MOEGRAD_ISA_AVX2;
  return MOEGRAD_ISA_SCALAR;
}

namespace {
void check(moegrad_status s, const char* what) {
  if (s != MOEGRAD_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: " + moegrad_status_string(s) + ": " +
                             moegrad_last_error_message());
}
}  // namespace

ContextPtr make_context(moegrad_isa isa, int32_t threads, bool fast_bf16) {
  moegrad_context* raw = nullptr;
  check(moegrad_context_create(&raw), "moegrad_context_create");
  ContextPtr ctx(raw);
  if (isa != MOEGRAD_ISA_AUTO) check(moegrad_context_set_isa(ctx.get(), isa), "moegrad_context_set_isa");
  if (threads != 0) check(moegrad_context_set_num_threads(ctx.get(), threads), "moegrad_context_set_num_threads");
  if (fast_bf16) check(moegrad_context_set_fast_bf16(ctx.get(), 1), "moegrad_context_set_fast_bf16");
  return ctx;
}

std::string RunOptions::describe() const {
  std::ostringstream os;
  os << "isa=" << isa_label(isa) << " threads=" << (threads ? std::to_string(threads) : std::string("default"));
  if (fast_bf16) os << " fast_bf16";
  if (workspace_misalign) os << " workspace+" << workspace_misalign;
  if (one_shot) os << " one-shot";
  return os.str();
}

std::string Outcome::describe() const {
  std::ostringstream os;
  os << phase << ": " << moegrad_status_string(status) << " \"" << message << "\"";
  return os.str();
}

Outcome run_call(const moegrad_grad_x_args& args, const moegrad_context* ctx, const RunOptions& opt) {
  Outcome out;
  if (opt.one_shot) {
    out.phase = "one-shot";
    out.status = moegrad_grad_x_run(&args, ctx);
    if (!out.ok()) out.message = moegrad_last_error_message();
    return out;
  }
  out.phase = "plan";
  moegrad_executor* raw = nullptr;
  out.status = moegrad_grad_x_get_workspace_size(&args, ctx, &out.workspace_bytes, &raw);
  ExecutorPtr executor(raw);
  if (!out.ok()) {
    out.message = moegrad_last_error_message();
    return out;
  }
  out.phase = "run";
  Bytes buffer(out.workspace_bytes + opt.workspace_misalign + 64, static_cast<std::byte>(opt.workspace_fill));
  const auto base = reinterpret_cast<uintptr_t>(buffer.data());
  void* workspace = reinterpret_cast<void*>((base + 63) / 64 * 64 + opt.workspace_misalign);
  if (out.workspace_bytes == 0 && opt.workspace_misalign == 0) workspace = nullptr;
  out.status = moegrad_grad_x(workspace, out.workspace_bytes, executor.get(), ctx);
  if (!out.ok()) out.message = moegrad_last_error_message();
  return out;
}

Outcome run_call(const moegrad_grad_x_args& args, const RunOptions& opt) {
  const auto ctx = make_context(opt.isa, opt.threads, opt.fast_bf16);
  return run_call(args, ctx.get(), opt);
}

std::string describe(const Problem& p, const RunOptions& opt) { return p.describe() + " | " + opt.describe(); }

Floats compute(const Problem& p, const RunOptions& opt, Outcome* outcome) {
  HostTensor grad_x = p.make_grad_x();
  Call call(p, grad_x);
  const Outcome out = run_call(call.args, opt);
  if (outcome) *outcome = out;
  if (!out.ok()) {
    ADD_FAILURE() << describe(p, opt) << ": " << out.describe();
    return Floats(static_cast<size_t>(p.batch * p.K), 0.0f);
  }
  // Always: a compact grad_x's storage is rounded up to 64 bytes, and that
  // slack is where an unmasked vector store past the last element lands.
  if (!grad_x.sentinel_outside_view())
    ADD_FAILURE() << describe(p, opt) << ": bytes of the grad_x buffer outside its elements were written";
  return read_matrix_f32(grad_x);
}

ScopedTuningFamily::ScopedTuningFamily(int family) { moegrad::runtime::set_tuning_amd_family_for_tests(family); }
ScopedTuningFamily::~ScopedTuningFamily() { moegrad::runtime::set_tuning_amd_family_for_tests(-1); }

ScopedEnv::ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) old_ = old;
  if (value) setenv(name_.c_str(), value->c_str(), 1);
  else unsetenv(name_.c_str());
}

ScopedEnv::~ScopedEnv() {
  if (old_) setenv(name_.c_str(), old_->c_str(), 1);
  else unsetenv(name_.c_str());
}

}  // namespace mgt
