// The oneDNN baselines (the module side of onednn_module.h) and the module's
// entry point. Here grad-x's: one dnnl::matmul per expert, d_expanded_x[rows
// of g] = grad_y[rows of g] x W[g]^T, then the same scatter-add as moegrad's
// non-fused path; the layer operators' are in onednn_layer_ops.cpp. Built
// only when libdnnl-dev is installed; it alone links libdnnl and libgomp.
#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <exception>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aligned_buffer.h"
#include "driver/scatter_add_split.h"
#include "moegrad/moegrad.h"
#include "onednn_common.h"
#include "onednn_module.h"

namespace moegrad::bench {
namespace {

// out[0:n] += in[0:n], cloned for AVX-512F, AVX2 and the x86-64 baseline and
// chosen by the CPU when the module loads (GCC target_clones): the module is
// built without ISA flags, and a loop for SSE alone would make this
// baseline's scatter-add slower than moegrad's, whose add_row runs at the
// CPU's vector width.
__attribute__((target_clones("avx512f", "avx2", "default"))) void add_row(float* __restrict out,
                                                                        const float* __restrict in, int64_t n) {
  for (int64_t c = 0; c < n; ++c) out[c] += in[c];
}

class DnnlNonfused final : public OnednnBackend {
 public:
  OnednnPrepare prepare(const BenchProblem& p, int threads, std::string* why) noexcept override {
    try {
      return prepare_or_throw(p, threads, why);
    } catch (const std::exception& e) {  // cli::CliError (out of memory) and the like
      *why = e.what();
      return OnednnPrepare::kFailed;
    }
  }

  bool run(float* grad_x, std::string* why) noexcept override {
    try {
      execute(grad_x);
      return true;
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
  }

  uint64_t workspace_bytes() const noexcept override {
    return static_cast<uint64_t>(problem_.m) * static_cast<uint64_t>(problem_.k) * 4 + scratchpad_bytes_;
  }

  std::string implementation() const override { return implementation_; }

 private:
  OnednnPrepare prepare_or_throw(const BenchProblem& p, int threads, std::string* why);
  void execute(float* grad_x);

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::map<int64_t, dnnl::matmul> by_rows_;      // one primitive per distinct expert row count
  std::vector<dnnl::matmul*> expert_primitive_;  // [non-empty experts]
  std::vector<std::unordered_map<int, dnnl::memory>> expert_args_;
  cli::AlignedBuffer d_expanded_x_;
  std::vector<int32_t> token_of_row_;  // [M]: the token each row adds into, -1 for none (as moegrad's)
  cli::AlignedBuffer scratchpad_;
  uint64_t scratchpad_bytes_ = 0;
  std::string implementation_;
  BenchProblem problem_;
  int threads_ = 1;
};

OnednnPrepare DnnlNonfused::prepare_or_throw(const BenchProblem& p, int threads, std::string* why) {
  using dnnl::memory;
  const memory::data_type dt = dnnl_data_type(p.format);
  // oneDNN's OpenMP runtime reads the thread count when a primitive is
  // created (it plans its blocking for it) and when it runs.
  omp_set_num_threads(threads);
  problem_ = p;
  threads_ = threads;
  const memory::dim N = p.n, K = p.k;
  const size_t esize = p.format == cli::FloatFormat::kF32 ? 4 : 2;
  d_expanded_x_ = cli::AlignedBuffer(static_cast<size_t>(p.m) * static_cast<size_t>(K) * 4,
                                     "d_expanded_x (oneDNN path)");
  token_of_row_.resize(static_cast<size_t>(p.m));  // filled by each run
  std::map<int64_t, dnnl::matmul::primitive_desc> pds;
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // W[g] is [K, N] row-major: as the [N, K] right operand, element (n, k)
    // sits at n*1 + k*N.
    const memory::desc w_md({N, K}, dt, memory::dims{1, N});
    for (int64_t g = 0; g < p.experts; ++g) {
      const int64_t rows = p.group_list[g];
      if (rows <= 0 || pds.count(rows)) continue;
      const memory::desc src_md({rows, N}, dt, memory::format_tag::ab);
      const memory::desc dst_md({rows, K}, memory::data_type::f32, memory::format_tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, w_md, dst_md), attr, engine_);
      scratchpad_bytes_ = std::max<uint64_t>(scratchpad_bytes_, pd.scratchpad_desc().get_size());
      add_implementation(&implementation_, pd.impl_info_str());
      pds.emplace(rows, pd);
    }
    for (const auto& [rows, pd] : pds) by_rows_.emplace(rows, dnnl::matmul(pd));
    scratchpad_ = cli::AlignedBuffer(scratchpad_bytes_, "oneDNN scratchpad");

    int64_t start = 0;
    for (int64_t g = 0; g < p.experts; ++g) {
      const int64_t rows = p.group_list[g];
      if (rows <= 0) continue;
      const dnnl::matmul::primitive_desc& pd = pds.at(rows);
      auto* gy = static_cast<const std::byte*>(p.grad_y) + static_cast<size_t>(start * N) * esize;
      auto* w = static_cast<const std::byte*>(p.weight) + static_cast<size_t>(g * K * N) * esize;
      float* dx = d_expanded_x_.as<float>() + static_cast<size_t>(start * K);
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, memory(pd.src_desc(), engine_, const_cast<std::byte*>(gy))},
          {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), engine_, const_cast<std::byte*>(w))},
          {DNNL_ARG_DST, memory(pd.dst_desc(), engine_, dx)}};
      if (scratchpad_bytes_ > 0) {
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), engine_, scratchpad_.data()));
      }
      expert_primitive_.push_back(&by_rows_.at(rows));
      expert_args_.push_back(std::move(args));
      start += rows;
    }
  } catch (const dnnl::error& e) {
    *why = onednn_version() + " cannot create a " + cli::format_name(p.format) + " matmul on this CPU (" +
           e.what() + ", status " + std::to_string(static_cast<int>(e.status)) + ")";
    return OnednnPrepare::kUnsupported;
  }
  return OnednnPrepare::kReady;
}

void DnnlNonfused::execute(float* grad_x) {
  const BenchProblem& p = problem_;
  omp_set_num_threads(threads_);
  for (size_t e = 0; e < expert_primitive_.size(); ++e) expert_primitive_[e]->execute(stream_, expert_args_[e]);
  stream_.wait();

  // Scatter-add in moegrad's order: per column block, zero, then rows in
  // ascending expanded order (SPEC §5: grad_x[b] = ((0 + c_i1) + c_i2) + ...),
  // with the same look-ahead as moegrad's scatter-add (the grad_x row 8 rows
  // ahead requested early), the same column blocks, each row's token found
  // once per call as moegrad's routing table finds it, and rows added at the
  // CPU's vector width, so both baselines differ only in the GEMM.
  const int64_t K = p.k;
  int32_t* token = token_of_row_.data();  // batch < 2^31, as moegrad's validation requires
  for (int64_t i = 0; i < p.m; ++i)
    token[i] = p.expanded_row_idx[i] < 0 ? -1 : static_cast<int32_t>(p.expanded_row_idx[i] / p.top_k);
  const int64_t width = driver::scatter_add_block_width(K, threads_);
  const int64_t blocks = (K + width - 1) / width;
  const float* dx = d_expanded_x_.as<float>();
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t k0 = block * width, k1 = std::min(K, k0 + width);
    for (int64_t b = 0; b < p.batch; ++b) std::fill(grad_x + b * K + k0, grad_x + b * K + k1, 0.0f);
    for (int64_t i = 0; i < p.m; ++i) {
      if (i + driver::kAddAhead < p.m && token[i + driver::kAddAhead] >= 0) {
        const float* ahead = grad_x + static_cast<int64_t>(token[i + driver::kAddAhead]) * K;
        for (int64_t c = k0; c < k1; c += 16) __builtin_prefetch(ahead + c, 1, 3);
      }
      if (token[i] >= 0) add_row(grad_x + static_cast<int64_t>(token[i]) * K + k0, dx + i * K + k0, k1 - k0);
    }
  }
}

OnednnBackend* create() {
  try {
    return new DnnlNonfused();
  } catch (const std::exception&) {  // no CPU engine, or out of memory
    return nullptr;
  }
}

constexpr OnednnModuleApi kApi{MOEGRAD_VERSION_STRING, onednn_version, create, create_onednn_layer_op};

}  // namespace
}  // namespace moegrad::bench

extern "C" const moegrad::bench::OnednnModuleApi* moegrad_bench_onednn_module_v2() {
  // ONEDNN_VERBOSE (or DNNL_VERBOSE) would print oneDNN's lines to stdout,
  // into the tables or the JSON, and from inside the timed calls; the bench
  // names the implementation oneDNN picked in its notes instead.
  dnnl_set_verbose(0);
  return &moegrad::bench::kApi;
}
