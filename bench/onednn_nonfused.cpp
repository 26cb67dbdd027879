// The loader side of the oneDNN baseline: finds moegrad_bench_onednn.so
// beside this executable (onednn_module.h), loads it once, and forwards.
#include "onednn_nonfused.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

#include "cli_error.h"
#include "moegrad/moegrad.h"
#include "onednn_module.h"

namespace moegrad::bench {
namespace {

struct LoadedModule {
  const OnednnModuleApi* api = nullptr;
  std::string why;  // set when api is null
};

#if MOEGRAD_BENCH_HAVE_DNNL
// MOEGRAD_BENCH_ONEDNN_MODULE is the module's path relative to the
// executable's directory, the same in the build tree and under an install
// prefix (bench/CMakeLists.txt), so a moved prefix keeps working.
LoadedModule load_module() {
  LoadedModule m;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    m.why = "cannot locate this executable (/proc/self/exe: " + ec.message() + ")";
    return m;
  }
  const std::string path = (exe.parent_path() / MOEGRAD_BENCH_ONEDNN_MODULE).lexically_normal().string();
  // Never closed: oneDNN's OpenMP runtime keeps threads until the process ends.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    m.why = "the oneDNN module did not load (" + std::string(err ? err : path) + ")";
    return m;
  }
  using Entry = const OnednnModuleApi* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, MOEGRAD_BENCH_ONEDNN_ENTRY));
  const OnednnModuleApi* api = entry ? entry() : nullptr;
  if (api == nullptr) {
    m.why = path + " has no " MOEGRAD_BENCH_ONEDNN_ENTRY;
  } else if (std::string(api->moegrad_version) != MOEGRAD_VERSION_STRING) {
    m.why = path + " belongs to moegrad " + api->moegrad_version + ", not " MOEGRAD_VERSION_STRING;
  } else {
    m.api = api;
  }
  return m;
}
#else
LoadedModule load_module() { return {nullptr, "this build has no oneDNN (install libdnnl-dev and reconfigure)"}; }
#endif

const LoadedModule& loaded_module() {
  static const LoadedModule m = load_module();
  return m;
}

}  // namespace

std::string OnednnNonfused::version() {
  const LoadedModule& m = loaded_module();
  return m.api ? m.api->onednn_version() : std::string();
}

std::string OnednnNonfused::unavailable_reason() { return loaded_module().why; }

OnednnNonfused::OnednnNonfused() = default;
OnednnNonfused::~OnednnNonfused() = default;

bool OnednnNonfused::prepare(const BenchProblem& p, int threads, std::string* why) {
  const LoadedModule& m = loaded_module();
  if (m.api == nullptr) {
    *why = m.why;
    return false;
  }
  backend_.reset(m.api->create());
  if (!backend_) {
    *why = version() + " has no CPU engine";
    return false;
  }
  switch (backend_->prepare(p, threads, why)) {
    case OnednnPrepare::kReady: return true;
    case OnednnPrepare::kUnsupported: break;
    case OnednnPrepare::kFailed: throw cli::CliError(cli::kExitFailure, *why);
  }
  backend_.reset();
  return false;
}

void OnednnNonfused::run(float* grad_x) {
  std::string why;
  if (!backend_->run(grad_x, &why)) throw cli::CliError(cli::kExitFailure, "oneDNN non-fused path: " + why);
}

uint64_t OnednnNonfused::workspace_bytes() const { return backend_ ? backend_->workspace_bytes() : 0; }

std::string OnednnNonfused::implementation() const { return backend_ ? backend_->implementation() : std::string(); }

}  // namespace moegrad::bench
