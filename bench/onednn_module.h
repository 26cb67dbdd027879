// The boundary between `moegrad bench` and the oneDNN baseline, which lives in
// a module (moegrad_bench_onednn.so) loaded at run time: the command itself
// then needs neither libdnnl nor libgomp to start, so an installed `moegrad`
// runs its other commands on a machine without oneDNN, and `bench` reports
// the baseline as unavailable there instead of failing to load.
//
// Both sides are compiled from this header by the same build (the module is
// refused when its moegrad version differs). No exception crosses it: the
// module reports every failure as a status and a message.
#pragma once

#include <cstdint>
#include <string>

#include "bench_problem.h"

namespace moegrad::bench {

enum class OnednnPrepare : int {
  kReady = 0,
  kUnsupported = 1,  // no matmul for this dtype on this CPU: the rows are null
  kFailed = 2,       // e.g. out of memory for d_expanded_x: the bench stops
};

class OnednnBackend {
 public:
  virtual ~OnednnBackend() = default;
  // See OnednnNonfused (onednn_nonfused.h). *why is set unless kReady.
  virtual OnednnPrepare prepare(const BenchProblem& p, int threads, std::string* why) noexcept = 0;
  // false with *why set when oneDNN fails to execute.
  virtual bool run(float* grad_x, std::string* why) noexcept = 0;
  virtual uint64_t workspace_bytes() const noexcept = 0;
  virtual std::string implementation() const = 0;
};

// The layer operators' baseline (`moegrad bench --op`): one matmul per
// non-empty expert into p.out, in place (the forward's rows of y, the weight
// grad's grad_weight[g]); run() also zeroes an empty expert's
// grad_weight[g], as moegrad writes it. See OnednnLayerOp (onednn_layer_op.h).
class OnednnLayerBackend {
 public:
  virtual ~OnednnLayerBackend() = default;
  // `p`'s buffers must outlive run().
  virtual OnednnPrepare prepare(const LayerOpProblem& p, int threads, std::string* why) noexcept = 0;
  virtual bool run(std::string* why) noexcept = 0;
  virtual uint64_t workspace_bytes() const noexcept = 0;  // the largest primitive's scratchpad
  virtual std::string implementation() const = 0;
};

struct OnednnModuleApi {
  const char* moegrad_version;             // MOEGRAD_VERSION_STRING of the module's build
  std::string (*onednn_version)();         // "oneDNN 2.6.3"
  OnednnBackend* (*create)();              // null if oneDNN has no CPU engine; `delete` it
  OnednnLayerBackend* (*create_layer)();   // the same
};

}  // namespace moegrad::bench

// The module's one exported symbol. Its number changes with OnednnModuleApi's
// layout, so a module of another layout is not found rather than misread
// (the version check cannot tell two commits of one version apart).
#define MOEGRAD_BENCH_ONEDNN_ENTRY "moegrad_bench_onednn_module_v2"
extern "C" const moegrad::bench::OnednnModuleApi* moegrad_bench_onednn_module_v2();
