// The layer operators' oneDNN baseline (`moegrad bench --op`): one
// dnnl::matmul per non-empty expert, written straight into the f32 output,
// as a framework without a grouped GEMM runs the layer.
//   forward:      y[rows of g]   [rows, N] = x[rows of g] [rows, K] @ W[g] [K, N]
//   weight grad:  grad_weight[g] [K, N]    = x[rows of g]^T [K, rows] @ grad_y[rows of g] [rows, N]
// x^T is x's rows described with strides {1, K}: oneDNN reads the transpose
// in place, as moegrad does. An empty expert's grad_weight[g] is zeroed in
// run() (moegrad writes it too), so both outputs are whole.
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aligned_buffer.h"
#include "onednn_common.h"
#include "onednn_module.h"

namespace moegrad::bench {
namespace {

class DnnlLayerOp final : public OnednnLayerBackend {
 public:
  OnednnPrepare prepare(const LayerOpProblem& p, int threads, std::string* why) noexcept override {
    try {
      return prepare_or_throw(p, threads, why);
    } catch (const std::exception& e) {  // out of memory and the like
      *why = e.what();
      return OnednnPrepare::kFailed;
    }
  }

  bool run(std::string* why) noexcept override {
    try {
      execute();
      return true;
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
  }

  uint64_t workspace_bytes() const noexcept override { return scratchpad_bytes_; }
  std::string implementation() const override { return implementation_; }

 private:
  OnednnPrepare prepare_or_throw(const LayerOpProblem& p, int threads, std::string* why);
  void execute();

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::map<int64_t, dnnl::matmul> by_rows_;  // one primitive per distinct expert row count
  std::vector<dnnl::matmul*> expert_primitive_;  // [non-empty experts]
  std::vector<std::unordered_map<int, dnnl::memory>> expert_args_;
  std::vector<std::pair<float*, size_t>> zeroed_;  // empty experts' grad_weight[g]: where, how many floats
  cli::AlignedBuffer scratchpad_;
  uint64_t scratchpad_bytes_ = 0;
  std::string implementation_;
  int threads_ = 1;
};

OnednnPrepare DnnlLayerOp::prepare_or_throw(const LayerOpProblem& p, int threads, std::string* why) {
  using dnnl::memory;
  const memory::data_type dt = dnnl_data_type(p.format);
  // oneDNN's OpenMP runtime reads the thread count when a primitive is
  // created (it plans its blocking for it) and when it runs.
  omp_set_num_threads(threads);
  threads_ = threads;
  const memory::dim N = p.n, K = p.k;
  const bool forward = p.op == BenchOp::kForward;
  const size_t esize = p.format == cli::FloatFormat::kF32 ? 4 : 2;
  std::map<int64_t, dnnl::matmul::primitive_desc> pds;
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    for (int64_t g = 0; g < p.experts; ++g) {
      const memory::dim R = p.group_list[g];
      if (R <= 0 || pds.count(R)) continue;
      const memory::desc src_md = forward ? memory::desc({R, K}, dt, memory::format_tag::ab)
                                          : memory::desc({K, R}, dt, memory::dims{1, K});
      const memory::desc w_md = forward ? memory::desc({K, N}, dt, memory::format_tag::ab)
                                        : memory::desc({R, N}, dt, memory::format_tag::ab);
      const memory::desc dst_md({forward ? R : K, N}, memory::data_type::f32, memory::format_tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, w_md, dst_md), attr, engine_);
      scratchpad_bytes_ = std::max<uint64_t>(scratchpad_bytes_, pd.scratchpad_desc().get_size());
      add_implementation(&implementation_, pd.impl_info_str());
      pds.emplace(R, pd);
    }
    for (const auto& [rows, pd] : pds) by_rows_.emplace(rows, dnnl::matmul(pd));
    scratchpad_ = cli::AlignedBuffer(scratchpad_bytes_, "oneDNN scratchpad");

    const auto k = static_cast<size_t>(K), n = static_cast<size_t>(N);
    size_t start = 0;
    for (int64_t g = 0; g < p.experts; ++g) {
      const int64_t rows = p.group_list[g];
      float* dst = forward ? p.out + start * n : p.out + static_cast<size_t>(g) * k * n;
      if (rows <= 0) {
        if (!forward) zeroed_.emplace_back(dst, k * n);
        continue;
      }
      const dnnl::matmul::primitive_desc& pd = pds.at(rows);
      auto* x = static_cast<const std::byte*>(p.x) + start * k * esize;
      auto* other = forward ? static_cast<const std::byte*>(p.weight) + static_cast<size_t>(g) * k * n * esize
                            : static_cast<const std::byte*>(p.grad_y) + start * n * esize;
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, memory(pd.src_desc(), engine_, const_cast<std::byte*>(x))},
          {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), engine_, const_cast<std::byte*>(other))},
          {DNNL_ARG_DST, memory(pd.dst_desc(), engine_, dst)}};
      if (scratchpad_bytes_ > 0) {
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), engine_, scratchpad_.data()));
      }
      expert_primitive_.push_back(&by_rows_.at(rows));
      expert_args_.push_back(std::move(args));
      start += static_cast<size_t>(rows);
    }
  } catch (const dnnl::error& e) {
    *why = onednn_version() + " cannot create a " + cli::format_name(p.format) + " matmul on this CPU (" + e.what() +
           ", status " + std::to_string(static_cast<int>(e.status)) + ")";
    return OnednnPrepare::kUnsupported;
  }
  return OnednnPrepare::kReady;
}

void DnnlLayerOp::execute() {
  omp_set_num_threads(threads_);
  for (const auto& [dst, count] : zeroed_) std::fill_n(dst, count, 0.0f);
  for (size_t e = 0; e < expert_primitive_.size(); ++e) expert_primitive_[e]->execute(stream_, expert_args_[e]);
  stream_.wait();
}

}  // namespace

OnednnLayerBackend* create_onednn_layer_op() {
  try {
    return new DnnlLayerOp();
  } catch (const std::exception&) {  // no CPU engine, or out of memory
    return nullptr;
  }
}

}  // namespace moegrad::bench
