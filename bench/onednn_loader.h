// Finds moegrad_bench_onednn.so beside this executable (onednn_module.h)
// and loads it once, for both baselines that live in it.
#pragma once

#include <memory>
#include <string>

#include "cli_error.h"
#include "onednn_module.h"

namespace moegrad::bench {

struct LoadedModule {
  const OnednnModuleApi* api = nullptr;
  std::string why;  // set when api is null
};

// The module, loaded on the first call; never unloaded (oneDNN's OpenMP
// runtime keeps threads until the process ends).
const LoadedModule& loaded_module();

// A backend made by `make` (a call of the module's create or create_layer)
// and prepared for p: ready, or null with *why set where it cannot run here
// (no module, no CPU engine, no matmul for this dtype on this CPU). Throws
// cli::CliError when preparing fails otherwise (out of memory).
template <class Backend, class Problem, class Make>
std::unique_ptr<Backend> prepared_backend(Make make, const Problem& p, int threads, std::string* why) {
  const LoadedModule& m = loaded_module();
  if (m.api == nullptr) {
    *why = m.why;
    return nullptr;
  }
  std::unique_ptr<Backend> backend(make(*m.api));
  if (!backend) {
    *why = m.api->onednn_version() + " has no CPU engine";
    return nullptr;
  }
  switch (backend->prepare(p, threads, why)) {
    case OnednnPrepare::kReady: return backend;
    case OnednnPrepare::kUnsupported: break;
    case OnednnPrepare::kFailed: throw cli::CliError(cli::kExitFailure, *why);
  }
  return nullptr;
}

}  // namespace moegrad::bench
