#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <random>
#include <sstream>

#include "fast_bf16_chain.h"
#include "float_formats.h"

namespace mgt {
namespace {

std::vector<int64_t> index_values(const HostTensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_index(t.offset_of_linear(i));
  return v;
}

// expert_of_row[i] from the group list (counts or cumulative), read from the tensor.
std::vector<int64_t> experts_of_rows(const Problem& p) {
  const auto gl = index_values(p.group_list);
  std::vector<int64_t> expert(static_cast<size_t>(p.M), -1);
  int64_t start = 0;
  for (int64_t g = 0; g < p.G; ++g) {
    const int64_t end = p.spec.group_list_type == MOEGRAD_GROUP_LIST_CUMSUM ? gl[static_cast<size_t>(g)]
                                                                          : start + gl[static_cast<size_t>(g)];
    for (int64_t i = start; i < end; ++i) expert.at(static_cast<size_t>(i)) = g;
    start = end;
  }
  return expert;
}

// The weights widened to f32, logical [G][K][N].
Floats widened_weight(const Problem& p) {
  Floats w(static_cast<size_t>(p.G * p.K * p.N));
  for (int64_t g = 0; g < p.G; ++g)
    for (int64_t k = 0; k < p.K; ++k)
      for (int64_t n = 0; n < p.N; ++n)
        w[static_cast<size_t>((g * p.K + k) * p.N + n)] = p.weight.get_float(p.weight.offset({g, k, n}));
  return w;
}

Floats widened_row(const Problem& p, int64_t i) {
  Floats row(static_cast<size_t>(p.N));
  for (int64_t n = 0; n < p.N; ++n) row[static_cast<size_t>(n)] = p.grad_y.get_float(p.grad_y.offset({i, n}));
  return row;
}

std::vector<std::vector<int64_t>> token_rows(const Problem& p) {
  const auto owner = owners_from_index(index_values(p.idx), p.routing.row_idx_type, p.M, p.top_k);
  return rows_of_tokens(owner, p.batch);
}

std::string hex(float v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(8) << std::setfill('0') << float_bits(v);
  return os.str();
}

std::string show(float v) {
  std::ostringstream os;
  os << std::setprecision(9) << v << " (" << hex(v) << ")";
  return os.str();
}

}  // namespace

Reference64 reference_f64(const Problem& p, const std::vector<int64_t>& tokens) {
  Reference64 ref;
  ref.batch = p.batch;
  ref.K = p.K;
  ref.tokens = tokens;
  if (ref.tokens.empty())
    for (int64_t b = 0; b < p.batch; ++b) ref.tokens.push_back(b);
  std::sort(ref.tokens.begin(), ref.tokens.end());
  ref.value.assign(ref.tokens.size() * static_cast<size_t>(p.K), 0.0);
  ref.abs_sum.assign(ref.value.size(), 0.0);
  ref.has_rows.resize(ref.tokens.size());

  const auto rows = token_rows(p);
  const auto expert = experts_of_rows(p);
  const auto w = widened_weight(p);
  for (size_t t = 0; t < ref.tokens.size(); ++t) {
    const auto& token_rows_t = rows.at(static_cast<size_t>(ref.tokens[t]));
    ref.has_rows[t] = !token_rows_t.empty();
    for (int64_t i : token_rows_t) {
      const auto gy = widened_row(p, i);
      const int64_t g = expert[static_cast<size_t>(i)];
      for (int64_t k = 0; k < p.K; ++k) {
        const float* wk = &w[static_cast<size_t>((g * p.K + k) * p.N)];
        double sum = 0.0, abs_sum = 0.0;
        for (int64_t n = 0; n < p.N; ++n) {
          const double term = static_cast<double>(gy[static_cast<size_t>(n)]) * static_cast<double>(wk[n]);
          sum += term;
          abs_sum += std::fabs(term);
        }
        ref.value[t * static_cast<size_t>(p.K) + static_cast<size_t>(k)] += sum;
        ref.abs_sum[t * static_cast<size_t>(p.K) + static_cast<size_t>(k)] += abs_sum;
      }
    }
  }
  return ref;
}

namespace {

// ((0 + c_i1) + c_i2) + ... over each token's rows in ascending order, with
// c_i = row_sum(gy row i, weight row (g(i), k)), NaNs then made canonical.
template <class RowSum>
Floats reference_in_row_order(const Problem& p, RowSum row_sum) {
  Floats out(static_cast<size_t>(p.batch * p.K), 0.0f);  // the leading "0 +"
  const auto rows = token_rows(p);
  const auto expert = experts_of_rows(p);
  const auto w = widened_weight(p);
  for (int64_t b = 0; b < p.batch; ++b) {
    float* acc = &out[static_cast<size_t>(b * p.K)];
    for (int64_t i : rows[static_cast<size_t>(b)]) {  // ascending i
      const auto gy = widened_row(p, i);
      for (int64_t k = 0; k < p.K; ++k) {
        const float* wk = &w[static_cast<size_t>((expert[static_cast<size_t>(i)] * p.K + k) * p.N)];
        acc[k] = acc[k] + row_sum(gy.data(), wk);
      }
    }
  }
  // The README's "NaN": each NaN is stored as the one positive quiet NaN
  // with payload zero, whichever NaNs met on the way.
  for (float& v : out)
    if (std::isnan(v)) v = bits_float(0x7fc00000u);
  return out;
}

}  // namespace

Floats reference_contract_order(const Problem& p) {
  return reference_in_row_order(p, [&](const float* gy, const float* wk) {
    float c = 0.0f;
    for (int64_t n = 0; n < p.N; ++n) c = std::fma(gy[n], wk[n], c);
    return c;
  });
}

Floats reference_fast_bf16_order(const Problem& p) {
  return reference_in_row_order(p, [&](const float* gy, const float* wk) {
    return fast_bf16_chain(p.N, [&](int64_t n) { return gy[n]; }, [&](int64_t n) { return wk[n]; });
  });
}

namespace {

// Checks got[b, k] for every computed token b with ok(t, e, got); reports
// the number of failures and the first one, described by show_want(t, e).
template <class Ok, class Want>
::testing::AssertionResult check_tokens(const Floats& got, const Reference64& ref,
                                        const std::string& context, const char* what, Ok ok, Want show_want) {
  if (static_cast<int64_t>(got.size()) != ref.batch * ref.K)
    return ::testing::AssertionFailure() << context << ": size " << got.size() << " != " << ref.batch * ref.K;
  int64_t failures = 0;
  std::ostringstream first;
  for (size_t t = 0; t < ref.tokens.size(); ++t) {
    const int64_t b = ref.tokens[t];
    for (int64_t k = 0; k < ref.K; ++k) {
      const size_t e = t * static_cast<size_t>(ref.K) + static_cast<size_t>(k);
      const float v = got[static_cast<size_t>(b * ref.K + k)];
      const bool good = ref.has_rows[t] ? ok(e, v) : float_bits(v) == 0u;  // no rows: exactly +0.0f
      if (!good && failures++ == 0) {
        first << "first at [b=" << b << ", k=" << k << "]: got " << show(v) << ", ";
        if (ref.has_rows[t]) first << show_want(e);
        else first << "want +0.0f (the token owns no rows)";
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << context << ": " << failures << " element(s) " << what << "; "
                                       << first.str();
}

}  // namespace

::testing::AssertionResult within_bound(const Floats& got, const Reference64& ref, int64_t N,
                                        int64_t top_k, const std::string& context) {
  // Each of the N + top_k roundings: 2^-24 of its result, or 2^-150 where
  // that is subnormal.
  const double unit = std::ldexp(1.0, -24) * static_cast<double>(N + top_k);
  const double floor = std::ldexp(1.0, -150) * static_cast<double>(N + top_k);
  return check_tokens(
      got, ref, context, "outside the SPEC §5 bound",
      [&](size_t e, float v) {
        return std::isfinite(v) &&
               std::fabs(static_cast<double>(v) - ref.value[e]) <= unit * ref.abs_sum[e] + floor;
      },
      [&](size_t e) {
        std::ostringstream os;
        os << "float64 reference " << std::setprecision(17) << ref.value[e] << ", bound "
           << unit * ref.abs_sum[e] + floor;
        return os.str();
      });
}

::testing::AssertionResult equals_reference(const Floats& got, const Reference64& ref,
                                            const std::string& context) {
  return check_tokens(
      got, ref, context, "differ from the exact result",
      [&](size_t e, float v) { return static_cast<double>(v) == ref.value[e]; },
      [&](size_t e) {
        std::ostringstream os;
        os << "exact reference " << std::setprecision(17) << ref.value[e];
        return os.str();
      });
}

::testing::AssertionResult bitwise_equal(const Floats& got, const Floats& want, int64_t K,
                                         const std::string& context) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << context << ": size " << got.size() << " != " << want.size();
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0)
    return ::testing::AssertionSuccess();
  size_t first = 0, count = 0;
  for (size_t e = got.size(); e-- > 0;)
    if (float_bits(got[e]) != float_bits(want[e])) {
      first = e;
      ++count;
    }
  const auto k_dim = static_cast<size_t>(K);
  return ::testing::AssertionFailure() << context << ": " << count << " element(s) differ bitwise; first at [b="
                                       << first / k_dim << ", k=" << first % k_dim << "]: got " << show(got[first])
                                       << ", want " << show(want[first]);
}

std::vector<int64_t> sample_tokens(int64_t batch, int64_t count, uint64_t seed) {
  std::vector<int64_t> all(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) all[static_cast<size_t>(b)] = b;
  if (count >= batch) return all;
  std::mt19937_64 rng(seed);
  std::vector<int64_t> sample = {0, batch - 1};
  std::sample(all.begin() + 1, all.end() - 1, std::back_inserter(sample), count - 2, rng);
  return sample;
}

}  // namespace mgt
