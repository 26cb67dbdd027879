#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "tensor.h"
// The pair order as the gtest suites write it out (header-only, no gtest).
#include "../../support/fast_bf16_chain.h"

namespace mgh {
namespace {

int64_t stride_of(const DLTensor& t, int d) {
  if (t.strides != nullptr) return t.strides[d];
  int64_t s = 1;
  for (int e = t.ndim - 1; e > d; --e) s *= t.shape[e];
  return s;
}

const std::byte* element(const DLTensor& t, const std::vector<int64_t>& index) {
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * stride_of(t, static_cast<int>(d));
  return static_cast<const std::byte*>(t.data) + t.byte_offset + off * ((t.dtype.bits + 7) / 8);
}

uint64_t raw_bits(const DLTensor& t, const std::vector<int64_t>& index) {
  uint64_t v = 0;
  std::memcpy(&v, element(t, index), static_cast<size_t>((t.dtype.bits + 7) / 8));
  return v;
}

int64_t slots_of(const moegrad_grad_x_args& a) { return a.batch * a.top_k; }  // valid args only

}  // namespace

double dl_get(const DLTensor& t, const std::vector<int64_t>& index) {
  const uint64_t b = raw_bits(t, index);
  if (same_dtype(t.dtype, kF32)) {
    const uint32_t w = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &w, sizeof f);
    return f;
  }
  if (same_dtype(t.dtype, kF16)) return f16_bits_to_double(static_cast<uint16_t>(b));
  if (same_dtype(t.dtype, kBF16)) return bf16_bits_to_double(static_cast<uint16_t>(b));
  if (t.dtype.bits == 32) return static_cast<int32_t>(b);
  return static_cast<double>(static_cast<int64_t>(b));
}

int64_t dl_get_int(const DLTensor& t, int64_t i) {
  const uint64_t b = raw_bits(t, {i});
  return t.dtype.bits == 32 ? static_cast<int64_t>(static_cast<int32_t>(b)) : static_cast<int64_t>(b);
}

uint32_t dl_get_f32_bits(const DLTensor& t, int64_t i, int64_t j) {
  return static_cast<uint32_t>(raw_bits(t, {i, j}));
}

std::vector<moegrad_status> content_violations(const moegrad_grad_x_args& a) {
  std::vector<moegrad_status> out;
  auto add = [&](moegrad_status s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  const int64_t M = a.grad_y->shape[0];
  const int64_t G = a.group_list->shape[0];
  // §4.6 group list.
  if (a.group_list_type == MOEGRAD_GROUP_LIST_COUNT) {
    bool negative = false, overflow = false;
    int64_t sum = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t c = dl_get_int(*a.group_list, g);
      negative = negative || c < 0;
      overflow = overflow || __builtin_add_overflow(sum, c, &sum);
    }
    // A negative count is named whatever the sum: with one, the counts
    // cannot describe a split of M, and the sum may still equal M.
    if (negative) {
      add(MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT);
    } else if (overflow || sum != M) {
      add(MOEGRAD_STATUS_GROUP_SUM_MISMATCH);
    }
  } else {
    int64_t prev = 0;  // the implicit cumsum before expert 0
    for (int64_t g = 0; g < G; ++g) {
      const int64_t end = dl_get_int(*a.group_list, g);
      if (end < 0) add(MOEGRAD_STATUS_NEGATIVE_GROUP_COUNT);
      if (end < prev) add(MOEGRAD_STATUS_CUMSUM_DECREASING);
      prev = end;
    }
    if (prev != M) add(MOEGRAD_STATUS_GROUP_SUM_MISMATCH);
  }
  // §4.8 index contents.
  const int64_t L = a.expanded_row_idx->shape[0];
  const int64_t slots = slots_of(a);
  if (a.row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL) {
    for (int64_t i = 0; i < M; ++i) {
      const int64_t v = dl_get_int(*a.expanded_row_idx, i);
      if (v != -1 && (v < 0 || v >= slots)) add(MOEGRAD_STATUS_INDEX_OUT_OF_RANGE);
    }
  } else {
    std::vector<bool> claimed(static_cast<size_t>(M), false);
    for (int64_t p = 0; p < L; ++p) {
      const int64_t e = dl_get_int(*a.expanded_row_idx, p);
      if (e == -1) continue;
      if (e < 0 || e >= M) {
        add(MOEGRAD_STATUS_INDEX_OUT_OF_RANGE);
        continue;
      }
      if (claimed[static_cast<size_t>(e)]) add(MOEGRAD_STATUS_DUPLICATE_INDEX);
      claimed[static_cast<size_t>(e)] = true;
    }
  }
  return out;
}

std::vector<int64_t> owner_of_rows(const moegrad_grad_x_args& a) {
  const int64_t M = a.grad_y->shape[0];
  std::vector<int64_t> owner(static_cast<size_t>(M), -1);
  if (a.row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL) {
    for (int64_t i = 0; i < M; ++i) {
      const int64_t v = dl_get_int(*a.expanded_row_idx, i);
      owner[static_cast<size_t>(i)] = v == -1 ? -1 : v / a.top_k;
    }
  } else {
    for (int64_t p = 0; p < a.expanded_row_idx->shape[0]; ++p) {
      const int64_t e = dl_get_int(*a.expanded_row_idx, p);
      if (e != -1) owner[static_cast<size_t>(e)] = p / a.top_k;
    }
  }
  return owner;
}

std::vector<int64_t> expert_of_rows(const moegrad_grad_x_args& a) {
  const int64_t M = a.grad_y->shape[0];
  const int64_t G = a.group_list->shape[0];
  std::vector<int64_t> expert(static_cast<size_t>(M), -1);
  int64_t start = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t v = dl_get_int(*a.group_list, g);
    const int64_t end = a.group_list_type == MOEGRAD_GROUP_LIST_COUNT ? start + v : v;
    for (int64_t i = start; i < end; ++i) expert[static_cast<size_t>(i)] = g;
    start = end;
  }
  return expert;
}

namespace {

// grad_y [M, N] and weight [G, K, N] widened once, row-major.
struct Widened {
  int64_t M, N, K, G;
  std::vector<double> gy, w;
};

Widened widen(const moegrad_grad_x_args& a) {
  Widened x{a.grad_y->shape[0], a.grad_y->shape[1], a.weight->shape[1], a.weight->shape[0], {}, {}};
  x.gy.resize(static_cast<size_t>(x.M * x.N));
  x.w.resize(static_cast<size_t>(x.G * x.K * x.N));
  for (int64_t i = 0; i < x.M; ++i)
    for (int64_t n = 0; n < x.N; ++n) x.gy[static_cast<size_t>(i * x.N + n)] = dl_get(*a.grad_y, {i, n});
  for (int64_t g = 0; g < x.G; ++g)
    for (int64_t k = 0; k < x.K; ++k)
      for (int64_t n = 0; n < x.N; ++n)
        x.w[static_cast<size_t>((g * x.K + k) * x.N + n)] = dl_get(*a.weight, {g, k, n});
  return x;
}

// The order of each row's sum over n.
enum class Chain { kFma, kFastBf16Pairs };

// SPEC §5's order with accumulator type T: c = chain over n from +0 (an f32
// fma per step for float, or the fast bf16 mode's pairs; exact products and
// sums for small integers in double), then out[b, k] = ((0 + c_i1) + c_i2) +
// ... over ascending rows.
template <typename T, Chain chain = Chain::kFma>
std::vector<T> reference_in(const moegrad_grad_x_args& a) {
  const Widened x = widen(a);
  const std::vector<int64_t> owner = owner_of_rows(a), expert = expert_of_rows(a);
  std::vector<T> out(static_cast<size_t>(a.batch * x.K), T(0));
  for (size_t i = 0; i < owner.size(); ++i) {  // ascending rows: ascending within every token
    if (owner[i] < 0) continue;
    const double* gy = &x.gy[i * static_cast<size_t>(x.N)];
    for (int64_t k = 0; k < x.K; ++k) {
      const double* w = &x.w[static_cast<size_t>((expert[i] * x.K + k) * x.N)];
      T c = T(0);
      if constexpr (chain == Chain::kFastBf16Pairs) {
        static_assert(std::is_same_v<T, float>);
        c = mgt::fast_bf16_chain(
            x.N, [&](int64_t n) { return static_cast<float>(gy[n]); }, [&](int64_t n) { return static_cast<float>(w[n]); });
      } else {
        for (int64_t n = 0; n < x.N; ++n) {
          if constexpr (std::is_same_v<T, float>) c = std::fma(static_cast<float>(gy[n]), static_cast<float>(w[n]), c);
          else c += gy[n] * w[n];
        }
      }
      out[static_cast<size_t>(owner[i] * x.K + k)] += c;
    }
  }
  return out;
}

// Every NaN as the canonical NaN, 0x7fc00000 (README, "NaN").
std::vector<float> canonical_nans(std::vector<float> out) {
  for (float& v : out)
    if (std::isnan(v)) {
      const uint32_t canonical = 0x7fc00000u;
      std::memcpy(&v, &canonical, sizeof v);
    }
  return out;
}

}  // namespace

std::vector<float> reference_contract(const moegrad_grad_x_args& a) { return canonical_nans(reference_in<float>(a)); }
std::vector<float> reference_fast_bf16(const moegrad_grad_x_args& a) {
  return canonical_nans(reference_in<float, Chain::kFastBf16Pairs>(a));
}
std::vector<double> reference_f64(const moegrad_grad_x_args& a) { return reference_in<double>(a); }

std::vector<float> to_float(const std::vector<double>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);
  return f;
}

std::vector<float> read_grad_x(const DLTensor& gx) {
  const int64_t B = gx.shape[0], K = gx.shape[1];
  std::vector<float> out(static_cast<size_t>(B * K));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < K; ++k) {
      const uint32_t w = dl_get_f32_bits(gx, b, k);
      std::memcpy(&out[static_cast<size_t>(b * K + k)], &w, sizeof w);
    }
  return out;
}

std::string compare_bits(const std::vector<float>& got, const std::vector<float>& want, int64_t K) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t g, w;
    std::memcpy(&g, &got[i], 4);
    std::memcpy(&w, &want[i], 4);
    if (g != w) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "first difference at (b=%zu, k=%zu): got %.9g (0x%08x), want %.9g (0x%08x)",
                    i / static_cast<size_t>(K), i % static_cast<size_t>(K), got[i], g, want[i], w);
      return buf;
    }
  }
  return "";
}

}  // namespace mgh
