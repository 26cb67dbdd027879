// What the oneDNN module's baselines share (module side only: this header
// includes dnnl.hpp, which nothing outside the module may need).
#pragma once

#include <dnnl.hpp>

#include <string>

#include "float_formats.h"
#include "onednn_module.h"

namespace moegrad::bench {

inline std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

inline dnnl::memory::data_type dnnl_data_type(cli::FloatFormat f) {
  switch (f) {
    case cli::FloatFormat::kF16: return dnnl::memory::data_type::f16;
    case cli::FloatFormat::kBF16: return dnnl::memory::data_type::bf16;
    case cli::FloatFormat::kF32: break;
  }
  return dnnl::memory::data_type::f32;
}

// Adds `impl` to a "+"-separated list of the kernels oneDNN picked, once:
// the experts' row counts may select different ones.
inline void add_implementation(std::string* list, const std::string& impl) {
  if (list->empty()) {
    *list = impl;
  } else if (("+" + *list + "+").find("+" + impl + "+") == std::string::npos) {
    *list += "+" + impl;
  }
}

// The layer operators' baseline (onednn_layer_ops.cpp); null if oneDNN has
// no CPU engine.
OnednnLayerBackend* create_onednn_layer_op();

}  // namespace moegrad::bench
