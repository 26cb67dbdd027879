#include "onednn_layer_op.h"

#include "cli_error.h"
#include "onednn_loader.h"

namespace moegrad::bench {

OnednnLayerOp::OnednnLayerOp() = default;
OnednnLayerOp::~OnednnLayerOp() = default;

bool OnednnLayerOp::prepare(const LayerOpProblem& p, int threads, std::string* why) {
  backend_ = prepared_backend<OnednnLayerBackend>([](const OnednnModuleApi& api) { return api.create_layer(); }, p,
                                                  threads, why);
  return backend_ != nullptr;
}

void OnednnLayerOp::run() {
  std::string why;
  if (!backend_->run(&why)) throw cli::CliError(cli::kExitFailure, "oneDNN matmuls: " + why);
}

uint64_t OnednnLayerOp::workspace_bytes() const { return backend_ ? backend_->workspace_bytes() : 0; }

std::string OnednnLayerOp::implementation() const { return backend_ ? backend_->implementation() : std::string(); }

}  // namespace moegrad::bench
