#include "ops_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

// The pair order as the gtest suites write it out (header-only, no gtest).
#include "../../support/fast_bf16_chain.h"

namespace mgh {

RoutingReference reference_routing(const std::vector<int64_t>& experts, int64_t G, int64_t active_num,
                                   int64_t capacity) {
  RoutingReference r;
  r.counts.assign(static_cast<size_t>(G), 0);
  const int64_t slots = static_cast<int64_t>(experts.size());
  // Expert by expert, each one's slots by ascending p: the stable sort.
  // Capacity keeps an expert's first C of them; active_num then keeps the
  // first A expanded rows of what is left, in that same order.
  for (int64_t g = 0; g < G; ++g) {
    int64_t taken = 0;
    for (int64_t p = 0; p < slots; ++p) {
      if (experts[static_cast<size_t>(p)] != g) continue;
      if (capacity >= 0 && taken == capacity) break;
      ++taken;
      if (active_num >= 0 && r.M == active_num) continue;
      r.pos.push_back(p);
      ++r.counts[static_cast<size_t>(g)];
      ++r.M;
    }
  }
  r.R = routing_rows(slots, G, active_num, capacity);
  return r;
}

int64_t routing_rows(int64_t slots, int64_t G, int64_t active_num, int64_t capacity) {
  int64_t R = slots;
  if (active_num >= 0) R = std::min(R, active_num);
  if (capacity >= 0) R = std::min(R, G * capacity);
  return R;
}

namespace {

void add_once(std::vector<moegrad_status>& out, moegrad_status s) {
  if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
}

}  // namespace

std::vector<moegrad_status> group_list_violations(const std::vector<int64_t>& group_list, int32_t group_list_type,
                                                  int64_t M) {
  std::vector<moegrad_status> out;
  if (group_list_type == MOEGRAD_GROUP_LIST_COUNT) {
    bool negative = false, overflow = false;
    int64_t sum = 0;
    for (int64_t c : group_list) {
      negative = negative || c < 0;
      overflow = overflow || __builtin_add_overflow(sum, c, &sum);
    }
    // A negative count is named whatever the sum (as for grad-x): with one,
    // the counts split no M rows, though they may still add up to M.
    if (negative) add_once(out, MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT);
    else if (overflow || sum != M) add_once(out, MOEGRAD_STATUS_GROUP_SUM_MISMATCH);
    return out;
  }
  int64_t prev = 0;  // the implicit cumsum before expert 0
  for (int64_t end : group_list) {
    if (end < 0) add_once(out, MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT);
    if (end < prev) add_once(out, MOEGRAD_STATUS_CUMSUM_DECREASING);
    prev = end;
  }
  if (prev != M) add_once(out, MOEGRAD_STATUS_GROUP_SUM_MISMATCH);
  return out;
}

std::vector<int64_t> group_starts(const std::vector<int64_t>& group_list, int32_t group_list_type) {
  std::vector<int64_t> starts(group_list.size() + 1, 0);
  for (size_t g = 0; g < group_list.size(); ++g)
    starts[g + 1] = group_list_type == MOEGRAD_GROUP_LIST_COUNT ? starts[g] + group_list[g] : group_list[g];
  return starts;
}

std::vector<moegrad_status> row_idx_violations(const std::vector<int64_t>& idx, int32_t row_idx_type, int64_t M,
                                               int64_t slots) {
  std::vector<moegrad_status> out;
  if (row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL) {
    for (int64_t i = 0; i < M; ++i) {  // entries past M are ignored
      const int64_t v = idx[static_cast<size_t>(i)];
      if (v != -1 && (v < 0 || v >= slots)) add_once(out, MOEGRAD_STATUS_INDEX_OUT_OF_RANGE);
    }
    return out;
  }
  std::vector<bool> claimed(static_cast<size_t>(M), false);
  for (int64_t e : idx) {
    if (e == -1) continue;
    if (e < 0 || e >= M) {
      add_once(out, MOEGRAD_STATUS_INDEX_OUT_OF_RANGE);
      continue;
    }
    if (claimed[static_cast<size_t>(e)]) add_once(out, MOEGRAD_STATUS_DUPLICATE_INDEX);
    claimed[static_cast<size_t>(e)] = true;
  }
  return out;
}

std::vector<int64_t> token_of_rows(const std::vector<int64_t>& idx, int32_t row_idx_type, int64_t M, int64_t top_k) {
  std::vector<int64_t> token(static_cast<size_t>(M), -1);
  if (row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL) {
    for (int64_t i = 0; i < M; ++i) {
      const int64_t v = idx[static_cast<size_t>(i)];
      token[static_cast<size_t>(i)] = v == -1 ? -1 : v / top_k;
    }
  } else {
    for (size_t p = 0; p < idx.size(); ++p)
      if (idx[p] != -1) token[static_cast<size_t>(idx[p])] = static_cast<int64_t>(p) / top_k;
  }
  return token;
}

namespace {

// One output element's chain over `terms` terms a(t) * b(t).
template <typename A, typename B>
float chain(GemmChain order, int64_t terms, A a, B b) {
  if (order == GemmChain::kFastBf16Pairs) return mgt::fast_bf16_chain(terms, a, b);
  float acc = 0.0f;
  for (int64_t t = 0; t < terms; ++t) acc = std::fma(a(t), b(t), acc);
  return acc;
}

size_t at(int64_t i) { return static_cast<size_t>(i); }

}  // namespace

std::vector<float> grouped_matmul_reference(const std::vector<float>& x, const std::vector<float>& w,
                                            const std::vector<int64_t>& starts, int64_t K, int64_t N,
                                            GemmChain order) {
  const int64_t G = static_cast<int64_t>(starts.size()) - 1, M = starts.back();
  std::vector<float> y(at(M * N));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = starts[at(g)]; i < starts[at(g + 1)]; ++i)
      for (int64_t n = 0; n < N; ++n)
        y[at(i * N + n)] = chain(
            order, K, [&](int64_t k) { return x[at(i * K + k)]; },
            [&](int64_t k) { return w[at((g * K + k) * N + n)]; });
  return y;
}

std::vector<float> weight_grad_reference(const std::vector<float>& x, const std::vector<float>& grad_y,
                                         const std::vector<int64_t>& starts, int64_t K, int64_t N, GemmChain order) {
  const int64_t G = static_cast<int64_t>(starts.size()) - 1;
  std::vector<float> c(at(G * K * N));
  for (int64_t g = 0; g < G; ++g) {
    const int64_t first = starts[at(g)], rows = starts[at(g + 1)] - first;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        c[at((g * K + k) * N + n)] = chain(
            order, rows, [&](int64_t t) { return x[at((first + t) * K + k)]; },
            [&](int64_t t) { return grad_y[at((first + t) * N + n)]; });
  }
  return c;
}

std::vector<float> scatter_add_reference(const std::vector<float>& d, const std::vector<int64_t>& token,
                                         int64_t batch, int64_t K) {
  std::vector<float> gx(at(batch * K), 0.0f);
  for (size_t i = 0; i < token.size(); ++i) {  // ascending rows: ascending within every token
    if (token[i] < 0) continue;
    for (int64_t k = 0; k < K; ++k) gx[at(token[i] * K + k)] += d[i * at(K) + at(k)];
  }
  return gx;
}

namespace {

Sums64 zero_sums(size_t n) {
  return Sums64{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0), std::vector<int64_t>(n, 0)};
}

void add_term(Sums64& s, size_t e, double term) {
  s.value[e] += term;
  s.abs_sum[e] += std::fabs(term);
  ++s.terms[e];
}

}  // namespace

Sums64 grouped_matmul_f64(const std::vector<float>& x, const std::vector<float>& w, const std::vector<int64_t>& starts,
                          int64_t K, int64_t N) {
  const int64_t G = static_cast<int64_t>(starts.size()) - 1, M = starts.back();
  Sums64 s = zero_sums(at(M * N));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = starts[at(g)]; i < starts[at(g + 1)]; ++i)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          add_term(s, at(i * N + n), static_cast<double>(x[at(i * K + k)]) * w[at((g * K + k) * N + n)]);
  return s;
}

Sums64 weight_grad_f64(const std::vector<float>& x, const std::vector<float>& grad_y,
                       const std::vector<int64_t>& starts, int64_t K, int64_t N) {
  const int64_t G = static_cast<int64_t>(starts.size()) - 1;
  Sums64 s = zero_sums(at(G * K * N));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = starts[at(g)]; i < starts[at(g + 1)]; ++i)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n)
          add_term(s, at((g * K + k) * N + n), static_cast<double>(x[at(i * K + k)]) * grad_y[at(i * N + n)]);
  return s;
}

Sums64 scatter_add_f64(const std::vector<float>& d, const std::vector<int64_t>& token, int64_t batch, int64_t K) {
  Sums64 s = zero_sums(at(batch * K));
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] < 0) continue;
    for (int64_t k = 0; k < K; ++k) add_term(s, at(token[i] * K + k), d[i * at(K) + at(k)]);
  }
  return s;
}

uint32_t store_f32_bits(float v) {
  if (std::isnan(v)) return 0x7fc00000u;
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

uint16_t store_f16_bits(float v) {
  if (std::isnan(v)) return 0x7e00;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(v));
  // 65504 is the largest f16; 65520 lies halfway to 2^16, and its tie goes
  // to the even significand, 2^16: infinity.
  if (a >= 65520.0) return static_cast<uint16_t>(sign | 0x7c00);
  // The spacing of f16 values around a: 2^(e - 10) in the binade [2^e,
  // 2^(e+1)), e >= -14, and 2^-24 for the subnormals below 2^-14. Every
  // step below is exact in double (a has 24 significant bits).
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const double spacing = std::ldexp(1.0, std::max(e - 1, -14) - 10);
  const double r = std::nearbyint(a / spacing) * spacing;  // to nearest, ties to even (the default mode)
  if (r < std::ldexp(1.0, -14)) return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(r, 24)));
  std::frexp(r, &e);  // r may have rounded up into the next binade
  const auto mantissa = static_cast<uint16_t>(std::ldexp(r, 11 - e) - 1024.0);
  return static_cast<uint16_t>(sign | ((e - 1 + 15) << 10) | mantissa);
}

uint16_t store_bf16_bits(float v) {
  if (std::isnan(v)) return 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  // Keep the upper half, rounded to nearest by the lower one, ties to an
  // even upper half; a carry steps into the next binade (or infinity).
  const uint32_t upper = bits >> 16, lower = bits & 0xffffu;
  const bool up = lower > 0x8000u || (lower == 0x8000u && (upper & 1u) != 0);
  return static_cast<uint16_t>(upper + (up ? 1u : 0u));
}

}  // namespace mgh
