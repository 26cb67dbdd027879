#include "onednn_loader.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

#include "moegrad/moegrad.h"

namespace moegrad::bench {
namespace {

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

}  // namespace

const LoadedModule& loaded_module() {
  static const LoadedModule m = load_module();
  return m;
}

}  // namespace moegrad::bench
