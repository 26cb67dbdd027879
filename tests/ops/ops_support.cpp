#include "ops_support.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>

#include "float_formats.h"

namespace mgt::ops {
namespace {

// Rounds v to t (the test's own encoders) and returns the stored bits.
uint64_t encode(DType t, float v) {
  switch (t) {
    case DType::kF32: return float_bits(v);
    case DType::kF16: return float_to_f16_bits(v);
    case DType::kBF16: return float_to_bf16_bits(v);
  }
  return 0;
}

template <typename Args>
struct Api;
template <>
struct Api<moegrad_moe_init_routing_args> {
  static constexpr auto plan = moegrad_moe_init_routing_get_workspace_size;
  static constexpr auto run = moegrad_moe_init_routing;
  static constexpr auto one_shot = moegrad_moe_init_routing_run;
};
template <>
struct Api<moegrad_grouped_matmul_args> {
  static constexpr auto plan = moegrad_grouped_matmul_get_workspace_size;
  static constexpr auto run = moegrad_grouped_matmul;
  static constexpr auto one_shot = moegrad_grouped_matmul_run;
};
template <>
struct Api<moegrad_grouped_matmul_weight_grad_args> {
  static constexpr auto plan = moegrad_grouped_matmul_weight_grad_get_workspace_size;
  static constexpr auto run = moegrad_grouped_matmul_weight_grad;
  static constexpr auto one_shot = moegrad_grouped_matmul_weight_grad_run;
};
template <>
struct Api<moegrad_moe_init_routing_grad_args> {
  static constexpr auto plan = moegrad_moe_init_routing_grad_get_workspace_size;
  static constexpr auto run = moegrad_moe_init_routing_grad;
  static constexpr auto one_shot = moegrad_moe_init_routing_grad_run;
};

struct OpExecutorDeleter {
  void operator()(moegrad_op_executor* e) const { moegrad_op_executor_destroy(e); }
};

}  // namespace

HostTensor float_tensor(DType t, std::vector<int64_t> shape, Fill fill, uint64_t seed, std::vector<int64_t> strides) {
  HostTensor out(dl_type(t), std::move(shape), std::move(strides));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> small(-3, 3);
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  // Exponent field all ones and the mantissa's width, for kNonFinite.
  const uint64_t max_exp = t == DType::kF32 ? 0x7f800000u : t == DType::kF16 ? 0x7c00u : 0x7f80u;
  const uint64_t mantissa = t == DType::kF32 ? 0x7fffffu : t == DType::kF16 ? 0x3ffu : 0x7fu;
  const uint64_t sign = t == DType::kF32 ? 0x80000000u : 0x8000u;
  for (int64_t e = 0; e < out.numel(); ++e) {
    const float v = fill == Fill::kSmallInt ? static_cast<float>(small(rng)) : static_cast<float>(uniform(rng));
    uint64_t bits = encode(t, v);
    if (fill == Fill::kNonFinite) {
      const uint64_t x = rng();
      const uint64_t s = (x >> 63) != 0 ? sign : 0;
      switch (x % 64) {
        case 0: bits = s | max_exp | ((x >> 8) & mantissa) | 1u; break;  // NaN: a nonzero payload
        case 1: bits = s | max_exp; break;                             // infinity
        case 2: bits = s; break;                                       // signed zero
        default: break;
      }
    }
    out.set_bits(out.offset_of_linear(e), bits);
  }
  return out;
}

HostTensor index_tensor(IndexDType t, std::vector<int64_t> shape, const std::vector<int64_t>& values,
                        std::vector<int64_t> strides) {
  HostTensor out(dl_type(t), std::move(shape), std::move(strides));
  for (int64_t e = 0; e < out.numel(); ++e) out.set_index(out.offset_of_linear(e), values.at(static_cast<size_t>(e)));
  return out;
}

HostTensor output_tensor(DLDataType t, std::vector<int64_t> shape, std::vector<int64_t> strides) {
  return HostTensor(t, std::move(shape), std::move(strides));  // sentinel-filled by construction
}

std::vector<double> float_values(const HostTensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t e = 0; e < t.numel(); ++e) v[static_cast<size_t>(e)] = t.get_float(t.offset_of_linear(e));
  return v;
}

std::vector<int64_t> index_values(const HostTensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t e = 0; e < t.numel(); ++e) v[static_cast<size_t>(e)] = t.get_index(t.offset_of_linear(e));
  return v;
}

std::vector<uint64_t> bit_values(const HostTensor& t) {
  std::vector<uint64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t e = 0; e < t.numel(); ++e) v[static_cast<size_t>(e)] = t.get_bits(t.offset_of_linear(e));
  return v;
}

std::vector<int64_t> permuted_strides(const std::vector<int64_t>& shape, const std::vector<int>& order) {
  std::vector<int64_t> strides(shape.size());
  int64_t step = 1;
  for (size_t i = order.size(); i-- > 0;) {
    strides[static_cast<size_t>(order[i])] = step;
    step *= shape[static_cast<size_t>(order[i])];
  }
  return strides;
}

std::vector<int64_t> random_experts(int64_t batch, int64_t top_k, int64_t G, uint64_t seed,
                                    const std::vector<int64_t>& empty) {
  std::vector<int64_t> allowed;
  for (int64_t g = 0; g < G; ++g)
    if (std::find(empty.begin(), empty.end(), g) == empty.end()) allowed.push_back(g);
  std::mt19937_64 rng(seed);
  std::vector<int64_t> out;
  for (int64_t b = 0; b < batch; ++b) {
    std::shuffle(allowed.begin(), allowed.end(), rng);
    for (int64_t j = 0; j < top_k; ++j)
      out.push_back(top_k <= static_cast<int64_t>(allowed.size())
                        ? allowed[static_cast<size_t>(j)]
                        : allowed[static_cast<size_t>(rng() % allowed.size())]);
  }
  return out;
}

RefRouting reference_routing(const std::vector<int64_t>& experts, int64_t top_k, int64_t G, int64_t active_num,
                             int64_t capacity) {
  const int64_t slots = static_cast<int64_t>(experts.size());
  std::vector<int64_t> order(static_cast<size_t>(slots));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return experts[static_cast<size_t>(a)] < experts[static_cast<size_t>(b)];
  });
  RefRouting r;
  r.counts.assign(static_cast<size_t>(G), 0);
  std::vector<int64_t> seen(static_cast<size_t>(G), 0);
  for (int64_t p : order) {
    const int64_t g = experts[static_cast<size_t>(p)];
    if (capacity >= 0 && seen[static_cast<size_t>(g)]++ >= capacity) continue;  // over capacity
    if (active_num >= 0 && static_cast<int64_t>(r.pos.size()) >= active_num) break;
    r.pos.push_back(p);
    ++r.counts[static_cast<size_t>(g)];
  }
  r.M = static_cast<int64_t>(r.pos.size());
  r.R = slots;
  if (active_num >= 0) r.R = std::min(r.R, active_num);
  if (capacity >= 0) r.R = std::min(r.R, G * capacity);
  (void)top_k;
  return r;
}

std::vector<int64_t> starts_of(const std::vector<int64_t>& counts) {
  std::vector<int64_t> s(counts.size() + 1, 0);
  for (size_t g = 0; g < counts.size(); ++g) s[g + 1] = s[g] + counts[g];
  return s;
}

Ref64 reference_grouped_matmul(const HostTensor& x, const HostTensor& w, const std::vector<int64_t>& counts) {
  const int64_t M = x.shape()[0], K = x.shape()[1], N = w.shape()[2];
  const std::vector<double> xv = float_values(x), wv = float_values(w);
  Ref64 r{std::vector<double>(static_cast<size_t>(M * N)), std::vector<double>(static_cast<size_t>(M * N))};
  const auto start = starts_of(counts);
  for (size_t g = 0; g < counts.size(); ++g)
    for (int64_t i = start[g]; i < start[g + 1]; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const double a = xv[static_cast<size_t>(i * K + k)];
        const double* wr = wv.data() + (static_cast<int64_t>(g) * K + k) * N;
        for (int64_t n = 0; n < N; ++n) {
          r.value[static_cast<size_t>(i * N + n)] += a * wr[n];
          r.abs_sum[static_cast<size_t>(i * N + n)] += std::fabs(a * wr[n]);
        }
      }
  return r;
}

Ref64 reference_weight_grad(const HostTensor& x, const HostTensor& gy, const std::vector<int64_t>& counts) {
  const int64_t K = x.shape()[1], N = gy.shape()[1], G = static_cast<int64_t>(counts.size());
  const std::vector<double> xv = float_values(x), gv = float_values(gy);
  Ref64 r{std::vector<double>(static_cast<size_t>(G * K * N)), std::vector<double>(static_cast<size_t>(G * K * N))};
  const auto start = starts_of(counts);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = start[static_cast<size_t>(g)]; i < start[static_cast<size_t>(g) + 1]; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const double a = xv[static_cast<size_t>(i * K + k)];
        const size_t out = static_cast<size_t>((g * K + k) * N);
        for (int64_t n = 0; n < N; ++n) {
          r.value[out + static_cast<size_t>(n)] += a * gv[static_cast<size_t>(i * N + n)];
          r.abs_sum[out + static_cast<size_t>(n)] += std::fabs(a * gv[static_cast<size_t>(i * N + n)]);
        }
      }
  return r;
}

Ref64 reference_scatter_add(const HostTensor& d, const std::vector<int64_t>& owner, int64_t batch) {
  const int64_t K = d.shape()[1];
  Ref64 r{std::vector<double>(static_cast<size_t>(batch * K), 0.0),
          std::vector<double>(static_cast<size_t>(batch * K), 0.0)};
  for (size_t i = 0; i < owner.size(); ++i) {
    if (owner[i] < 0) continue;
    for (int64_t k = 0; k < K; ++k) {
      const double v = d.get_float(d.offset({static_cast<int64_t>(i), k}));
      r.value[static_cast<size_t>(owner[i] * K + k)] += v;
      r.abs_sum[static_cast<size_t>(owner[i] * K + k)] += std::fabs(v);
    }
  }
  return r;
}

double rounding_rel(DType t) {
  switch (t) {
    case DType::kF32: return 0.0;
    case DType::kF16: return std::ldexp(1.0, -11);
    case DType::kBF16: return std::ldexp(1.0, -8);
  }
  return 0.0;
}

::testing::AssertionResult within_bound(const HostTensor& got, const Ref64& ref, int64_t terms, double out_rel,
                                        const std::string& context) {
  const auto v = float_values(got);
  if (v.size() != ref.value.size())
    return ::testing::AssertionFailure() << context << ": " << v.size() << " elements, reference has "
                                         << ref.value.size();
  for (size_t e = 0; e < v.size(); ++e) {
    const double tol = static_cast<double>(terms) * std::ldexp(ref.abs_sum[e], -24) + out_rel * std::fabs(ref.value[e]);
    if (!(std::fabs(v[e] - ref.value[e]) <= tol))
      return ::testing::AssertionFailure() << context << ": element " << e << " = " << v[e] << ", float64 reference "
                                           << ref.value[e] << ", tolerance " << tol;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_bits(const HostTensor& got, const HostTensor& want, const std::string& context) {
  if (got.shape() != want.shape()) return ::testing::AssertionFailure() << context << ": shapes differ";
  const auto a = bit_values(got), b = bit_values(want);
  for (size_t e = 0; e < a.size(); ++e)
    if (a[e] != b[e])
      return ::testing::AssertionFailure() << context << ": first difference at element " << e << " (bits 0x"
                                           << std::hex << a[e] << " vs 0x" << b[e] << ")";
  return ::testing::AssertionSuccess();
}

template <typename Args>
Outcome call(const Args& args, const moegrad_context* ctx, bool one_shot) {
  Outcome out;
  if (one_shot) {
    out.phase = "one-shot";
    out.status = Api<Args>::one_shot(&args, ctx);
    if (!out.ok()) out.message = moegrad_last_error_message();
    return out;
  }
  out.phase = "plan";
  moegrad_op_executor* raw = nullptr;
  out.status = Api<Args>::plan(&args, ctx, &out.workspace_bytes, &raw);
  std::unique_ptr<moegrad_op_executor, OpExecutorDeleter> executor(raw);
  if (!out.ok()) {
    out.message = moegrad_last_error_message();
    return out;
  }
  out.phase = "run";
  std::vector<std::byte> buffer(out.workspace_bytes + 64 + 3, std::byte{0xA5});
  const auto base = reinterpret_cast<uintptr_t>(buffer.data());
  void* workspace = reinterpret_cast<void*>((base + 63) / 64 * 64 + 3);
  out.status = Api<Args>::run(workspace, out.workspace_bytes, executor.get(), ctx);
  if (!out.ok()) out.message = moegrad_last_error_message();
  return out;
}

template Outcome call(const moegrad_moe_init_routing_args&, const moegrad_context*, bool);
template Outcome call(const moegrad_grouped_matmul_args&, const moegrad_context*, bool);
template Outcome call(const moegrad_grouped_matmul_weight_grad_args&, const moegrad_context*, bool);
template Outcome call(const moegrad_moe_init_routing_grad_args&, const moegrad_context*, bool);

std::string run_label(moegrad_isa isa, int32_t threads) {
  std::ostringstream os;
  os << "isa=" << isa_label(isa) << " threads=" << threads;
  return os.str();
}

}  // namespace mgt::ops
