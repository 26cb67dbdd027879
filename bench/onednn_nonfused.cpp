#include "onednn_nonfused.h"

#include <utility>

#if MOEGRAD_BENCH_HAVE_DNNL

#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

#include "aligned_buffer.h"

namespace moegrad::bench {

struct OnednnNonfused::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<int64_t, dnnl::matmul> by_rows;         // one primitive per distinct expert row count
  std::vector<dnnl::matmul*> expert_primitive;     // [non-empty experts]
  std::vector<std::unordered_map<int, dnnl::memory>> expert_args;
  cli::AlignedBuffer d_expanded_x;
  cli::AlignedBuffer scratchpad;
  uint64_t scratchpad_bytes = 0;
  std::string implementation;
  BenchProblem problem;
  int threads = 1;
};

std::string OnednnNonfused::version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

OnednnNonfused::OnednnNonfused() = default;
OnednnNonfused::~OnednnNonfused() = default;

bool OnednnNonfused::prepare(const BenchProblem& p, int threads, std::string* why) {
  using dnnl::memory;
  memory::data_type dt = memory::data_type::f32;
  switch (p.format) {
    case cli::FloatFormat::kF32: dt = memory::data_type::f32; break;
    case cli::FloatFormat::kF16: dt = memory::data_type::f16; break;
    case cli::FloatFormat::kBF16: dt = memory::data_type::bf16; break;
  }
  // oneDNN's OpenMP runtime reads the thread count when a primitive is
  // created (it plans its blocking for it) and when it runs.
  omp_set_num_threads(threads);
  auto impl = std::make_unique<Impl>();
  impl->problem = p;
  impl->threads = threads;
  const memory::dim N = p.n, K = p.k;
  const size_t esize = p.format == cli::FloatFormat::kF32 ? 4 : 2;
  impl->d_expanded_x = cli::AlignedBuffer(static_cast<size_t>(p.m) * static_cast<size_t>(K) * 4,
                                          "d_expanded_x (oneDNN path)");
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
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, w_md, dst_md), attr, impl->engine);
      impl->scratchpad_bytes = std::max<uint64_t>(impl->scratchpad_bytes, pd.scratchpad_desc().get_size());
      if (impl->implementation.empty()) impl->implementation = pd.impl_info_str();
      pds.emplace(rows, pd);
    }
    for (const auto& [rows, pd] : pds) impl->by_rows.emplace(rows, dnnl::matmul(pd));
    impl->scratchpad = cli::AlignedBuffer(impl->scratchpad_bytes, "oneDNN scratchpad");

    int64_t start = 0;
    for (int64_t g = 0; g < p.experts; ++g) {
      const int64_t rows = p.group_list[g];
      if (rows <= 0) continue;
      const dnnl::matmul::primitive_desc& pd = pds.at(rows);
      auto* gy = static_cast<const std::byte*>(p.grad_y) + static_cast<size_t>(start * N) * esize;
      auto* w = static_cast<const std::byte*>(p.weight) + static_cast<size_t>(g * K * N) * esize;
      float* dx = impl->d_expanded_x.as<float>() + static_cast<size_t>(start * K);
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, memory(pd.src_desc(), impl->engine, const_cast<std::byte*>(gy))},
          {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), impl->engine, const_cast<std::byte*>(w))},
          {DNNL_ARG_DST, memory(pd.dst_desc(), impl->engine, dx)}};
      if (impl->scratchpad_bytes > 0) {
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), impl->engine, impl->scratchpad.data()));
      }
      impl->expert_primitive.push_back(&impl->by_rows.at(rows));
      impl->expert_args.push_back(std::move(args));
      start += rows;
    }
  } catch (const dnnl::error& e) {
    *why = version() + " cannot create a " + cli::format_name(p.format) + " matmul on this CPU (" + e.what() +
           ", status " + std::to_string(static_cast<int>(e.status)) + ")";
    return false;
  }
  impl_ = std::move(impl);
  return true;
}

// Rows of look-ahead in the scatter-add (as driver/grad_x_driver.cpp).
constexpr int64_t kAddAhead = 8;

void OnednnNonfused::run(float* grad_x) {
  Impl& s = *impl_;
  const BenchProblem& p = s.problem;
  omp_set_num_threads(s.threads);
  for (size_t e = 0; e < s.expert_primitive.size(); ++e) s.expert_primitive[e]->execute(s.stream, s.expert_args[e]);
  s.stream.wait();

  // Scatter-add in moegrad's order: per column block, zero, then rows in
  // ascending expanded order (SPEC §5: grad_x[b] = ((0 + c_i1) + c_i2) + ...),
  // with the same look-ahead as moegrad's scatter-add (the grad_x row 8 rows
  // ahead requested early), so both baselines differ only in the GEMM.
  const int64_t K = p.k;
  const int64_t per_block = (K + 4 * s.threads - 1) / (4 * s.threads);
  const int64_t width = std::max<int64_t>(64, (per_block + 15) / 16 * 16);
  const int64_t blocks = (K + width - 1) / width;
  const float* dx = s.d_expanded_x.as<float>();
#pragma omp parallel for num_threads(s.threads) schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t k0 = block * width, k1 = std::min(K, k0 + width);
    for (int64_t b = 0; b < p.batch; ++b) std::fill(grad_x + b * K + k0, grad_x + b * K + k1, 0.0f);
    for (int64_t i = 0; i < p.m; ++i) {
      if (i + kAddAhead < p.m && p.expanded_row_idx[i + kAddAhead] >= 0) {
        const float* ahead = grad_x + (p.expanded_row_idx[i + kAddAhead] / p.top_k) * K;
        for (int64_t c = k0; c < k1; c += 16) __builtin_prefetch(ahead + c, 1, 3);
      }
      const int64_t pos = p.expanded_row_idx[i];
      if (pos < 0) continue;
      float* out = grad_x + (pos / p.top_k) * K;
      const float* in = dx + i * K;
      for (int64_t c = k0; c < k1; ++c) out[c] += in[c];
    }
  }
}

uint64_t OnednnNonfused::workspace_bytes() const {
  if (!impl_) return 0;
  return static_cast<uint64_t>(impl_->problem.m) * static_cast<uint64_t>(impl_->problem.k) * 4 + impl_->scratchpad_bytes;
}

std::string OnednnNonfused::implementation() const { return impl_ ? impl_->implementation : std::string(); }

}  // namespace moegrad::bench

#else  // !MOEGRAD_BENCH_HAVE_DNNL

namespace moegrad::bench {

struct OnednnNonfused::Impl {};

std::string OnednnNonfused::version() { return ""; }
OnednnNonfused::OnednnNonfused() = default;
OnednnNonfused::~OnednnNonfused() = default;

bool OnednnNonfused::prepare(const BenchProblem&, int, std::string* why) {
  *why = "this build has no oneDNN (install libdnnl-dev and reconfigure)";
  return false;
}

void OnednnNonfused::run(float*) {}
uint64_t OnednnNonfused::workspace_bytes() const { return 0; }
std::string OnednnNonfused::implementation() const { return {}; }

}  // namespace moegrad::bench

#endif
