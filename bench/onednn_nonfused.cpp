// The command's side of the grad-x oneDNN baseline: forwards to the module
// (onednn_loader.h).
#include "onednn_nonfused.h"

#include "cli_error.h"
#include "onednn_loader.h"

namespace moegrad::bench {

std::string OnednnNonfused::version() {
  const LoadedModule& m = loaded_module();
  return m.api ? m.api->onednn_version() : std::string();
}

std::string OnednnNonfused::unavailable_reason() { return loaded_module().why; }

OnednnNonfused::OnednnNonfused() = default;
OnednnNonfused::~OnednnNonfused() = default;

bool OnednnNonfused::prepare(const BenchProblem& p, int threads, std::string* why) {
  backend_ = prepared_backend<OnednnBackend>([](const OnednnModuleApi& api) { return api.create(); }, p, threads, why);
  return backend_ != nullptr;
}

void OnednnNonfused::run(float* grad_x) {
  std::string why;
  if (!backend_->run(grad_x, &why)) throw cli::CliError(cli::kExitFailure, "oneDNN non-fused path: " + why);
}

uint64_t OnednnNonfused::workspace_bytes() const { return backend_ ? backend_->workspace_bytes() : 0; }

std::string OnednnNonfused::implementation() const { return backend_ ? backend_->implementation() : std::string(); }

}  // namespace moegrad::bench
