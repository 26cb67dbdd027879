#include "problem.h"

#include <random>
#include <sstream>
#include <stdexcept>

#include "float_formats.h"

namespace mgt {
namespace {

struct BitLayout {
  int frac_bits;
  int bias;
  int sign_shift;
};

BitLayout bit_layout(DType t) {
  switch (t) {
    case DType::kF32: return {23, 127, 31};
    case DType::kF16: return {10, 15, 15};
    case DType::kBF16: return {7, 127, 15};
  }
  throw std::invalid_argument("bit_layout");
}

uint32_t pack(BitLayout f, bool negative, uint32_t biased_exp, uint64_t mantissa) {
  return (static_cast<uint32_t>(negative) << f.sign_shift) | (biased_exp << f.frac_bits) |
         static_cast<uint32_t>(mantissa & ((uint64_t{1} << f.frac_bits) - 1));
}

uint32_t encode_exact(DType t, float v) {
  switch (t) {
    case DType::kF32: return float_bits(v);
    case DType::kF16: return float_to_f16_bits(v);
    case DType::kBF16: return float_to_bf16_bits(v);
  }
  throw std::invalid_argument("encode_exact");
}

// Draws the raw bits of one element of dtype t from a fixed-seed
// mt19937_64. Uniform and small-integer values need at most 32 random bits
// (bit 31 sign, bits 24..30 the choice, low bits the mantissa), so one draw
// serves two elements; the wide kinds use a whole draw (bit 63 sign, bits
// 40..47 the choice, bits 48.. the exponent, low bits the mantissa).
class ValueSource {
 public:
  ValueSource(DType t, Values v, uint64_t seed) : type_(t), values_(v), layout_(bit_layout(t)), rng_(seed) {
    for (int i = -3; i <= 3; ++i) small_int_[i + 3] = encode_exact(t, static_cast<float>(i));
  }

  uint32_t next() {
    switch (values_) {
      case Values::kUniform: {  // exponent -4..0
        const uint32_t x = half_draw();
        return pack(layout_, (x >> 31) != 0, static_cast<uint32_t>(layout_.bias - 4) + ((x >> 24) & 0x7f) % 5, x);
      }
      case Values::kSmallInt:
        return small_int_[((half_draw() >> 24) & 0x7f) % 7];
      case Values::kWideExponent: {
        const uint64_t x = rng_();
        const bool negative = (x >> 63) != 0;
        if (((x >> 40) & 0xff) % 16 == 0) return pack(layout_, negative, 0, 0);  // signed zero
        const int lo = type_ == DType::kF16 ? -14 : -24;
        const int hi = type_ == DType::kF16 ? 15 : 24;
        const int e = lo + static_cast<int>((x >> 48) % static_cast<uint64_t>(hi - lo + 1));
        return pack(layout_, negative, static_cast<uint32_t>(e + layout_.bias), x);
      }
      case Values::kNonFinite: {
        const uint64_t x = rng_();
        const bool negative = (x >> 63) != 0;
        const auto pick = static_cast<uint32_t>((x >> 40) & 0xff) % 64;
        const uint32_t max_exp = (1u << (layout_.sign_shift - layout_.frac_bits)) - 1u;
        if (pick == 0) return pack(layout_, negative, max_exp, x | 1u);  // NaN: a nonzero payload
        if (pick == 1) return pack(layout_, negative, max_exp, 0);       // infinity
        if (pick <= 3) return pack(layout_, negative, 0, 0);             // signed zero
        const auto e = static_cast<uint32_t>(layout_.bias - 4) + static_cast<uint32_t>((x >> 48) % 5);
        return pack(layout_, negative, e, x);
      }
      case Values::kTiny: {
        const uint64_t x = rng_();
        const bool negative = (x >> 63) != 0;
        const auto pick = static_cast<uint32_t>((x >> 40) & 0xff);
        if (type_ == DType::kF16)  // biased exponent 0 (denormal), 1 or 2
          return pack(layout_, negative, pick % 3, x);
        const int e = -75 + static_cast<int>(pick % 14);  // products 2^-150 .. 2^-122
        return pack(layout_, negative, static_cast<uint32_t>(e + layout_.bias), x);
      }
    }
    throw std::logic_error("ValueSource");
  }

 private:
  uint32_t half_draw() {
    if (spare_bits_) {
      spare_bits_ = false;
      return static_cast<uint32_t>(spare_ >> 32);
    }
    spare_ = rng_();
    spare_bits_ = true;
    return static_cast<uint32_t>(spare_);
  }

  DType type_;
  Values values_;
  BitLayout layout_;
  std::mt19937_64 rng_;
  uint64_t spare_ = 0;
  bool spare_bits_ = false;
  uint32_t small_int_[7];
};

std::string index_list(const std::vector<int64_t>& v, size_t max_items) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size() && i < max_items; ++i) os << (i ? "," : "") << v[i];
  if (v.size() > max_items) os << ",...";
  os << ']';
  return os.str();
}

}  // namespace

const char* values_name(Values v) {
  switch (v) {
    case Values::kUniform: return "uniform";
    case Values::kSmallInt: return "small-int";
    case Values::kWideExponent: return "wide-exponent";
    case Values::kTiny: return "tiny";
    case Values::kNonFinite: return "non-finite";
  }
  return "?";
}

std::string Layout::describe() const {
  std::ostringstream os;
  os << "grad_y:" << (grad_y_column_major ? "column-major" : "row-major");
  if (grad_y_row_pad) os << "+pad" << grad_y_row_pad;
  os << " weight:"
     << (weight_nk_buffer       ? "[G,N,K]-transposed"
         : weight_every_other_n ? "[G,K,2N][:,:,::2]"
         : weight_g_innermost   ? "[K,N,G]-permuted"
                                : "compact");
  os << " grad_x:" << (grad_x_column_major ? "column-major" : "row-major");
  if (grad_x_row_pad) os << "+pad" << grad_x_row_pad;
  if (byte_offset) os << " byte_offset=" << byte_offset;
  if (explicit_strides) os << " explicit-strides";
  return os.str();
}

ProblemSpec make_spec(const Dims& d, int32_t row_idx_type, double keep_ratio, uint64_t routing_seed) {
  ProblemSpec s;
  s.routing.batch = d.batch;
  s.routing.top_k = d.top_k;
  s.routing.experts = d.experts;
  s.routing.row_idx_type = row_idx_type;
  s.routing.keep_ratio = keep_ratio;
  s.routing.seed = routing_seed;
  s.K = d.K;
  s.N = d.N;
  return s;
}

void store_group_list(HostTensor& group_list, const std::vector<int64_t>& counts, int32_t group_list_type) {
  int64_t running = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    running += counts[g];
    group_list.set_index(static_cast<int64_t>(g), group_list_type == MOEGRAD_GROUP_LIST_CUMSUM ? running : counts[g]);
  }
}

Problem::Problem(const ProblemSpec& s, const Layout& l) : spec(s), layout(l), routing(make_routing(s.routing)) {
  M = routing.M;
  N = spec.N;
  K = spec.K;
  G = routing.experts;
  batch = routing.batch;
  top_k = routing.top_k;

  std::vector<int64_t> gy_strides;
  if (layout.grad_y_column_major) gy_strides = {1, M};
  else if (layout.grad_y_row_pad || layout.explicit_strides) gy_strides = {N + layout.grad_y_row_pad, 1};
  grad_y = HostTensor(dl_type(spec.dtype), {M, N}, gy_strides, layout.byte_offset);

  std::vector<int64_t> w_strides;
  if (layout.weight_nk_buffer) w_strides = {N * K, 1, K};
  else if (layout.weight_every_other_n) w_strides = {2 * K * N, 2 * N, 2};
  else if (layout.weight_g_innermost) w_strides = {1, N * G, G};
  else if (layout.explicit_strides) w_strides = {K * N, N, 1};
  weight = HostTensor(dl_type(spec.dtype), {G, K, N}, w_strides, layout.byte_offset);

  const auto gy_s = grad_y.strides();
  ValueSource gy_values(spec.dtype, spec.values, spec.value_seed);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) grad_y.set_bits(i * gy_s[0] + n * gy_s[1], gy_values.next());
  const auto w_s = weight.strides();
  ValueSource w_values(spec.dtype, spec.values, spec.value_seed ^ 0x9E3779B97F4A7C15ull);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) weight.set_bits(g * w_s[0] + k * w_s[1] + n * w_s[2], w_values.next());

  const std::vector<int64_t> compact1 = layout.explicit_strides ? std::vector<int64_t>{1} : std::vector<int64_t>{};
  idx = HostTensor(dl_type(spec.idx_dtype), {routing.L()}, compact1, layout.byte_offset);
  for (int64_t p = 0; p < routing.L(); ++p) idx.set_index(p, routing.idx[static_cast<size_t>(p)]);
  group_list = HostTensor(dl_type(spec.group_list_dtype), {G}, compact1, layout.byte_offset);
  store_group_list(group_list, routing.counts, spec.group_list_type);
}

HostTensor Problem::make_grad_x() const {
  std::vector<int64_t> strides;
  if (layout.grad_x_column_major) strides = {1, batch};
  else if (layout.grad_x_row_pad || layout.explicit_strides) strides = {K + layout.grad_x_row_pad, 1};
  return HostTensor(kDLF32, {batch, K}, strides, layout.byte_offset);
}

std::string Problem::describe() const {
  std::ostringstream os;
  os << "batch=" << batch << " top_k=" << top_k << " G=" << G << " M=" << M << " N=" << N << " K=" << K
     << " L=" << routing.L() << " dtype=" << dtype_name(spec.dtype) << " row_idx_type=" << routing.row_idx_type
     << " idx=" << index_dtype_name(spec.idx_dtype) << " group_list=" << index_dtype_name(spec.group_list_dtype)
     << (spec.group_list_type == MOEGRAD_GROUP_LIST_CUMSUM ? "/cumsum" : "/count")
     << " counts=" << index_list(routing.counts, 12) << " keep_ratio=" << spec.routing.keep_ratio
     << " values=" << values_name(spec.values) << " layout={" << layout.describe() << "}";
  return os.str();
}

Call::Call(const Problem& p, HostTensor& grad_x_tensor)
    : grad_y(p.grad_y.view()),
      weight(p.weight.view()),
      idx(p.idx.view()),
      group_list(p.group_list.view()),
      grad_x(grad_x_tensor.view()) {
  args.grad_y = &grad_y;
  args.weight = &weight;
  args.expanded_row_idx = &idx;
  args.group_list = &group_list;
  args.grad_x = &grad_x;
  args.batch = p.batch;
  args.top_k = p.top_k;
  args.row_idx_type = p.routing.row_idx_type;
  args.group_list_type = p.spec.group_list_type;
}

}  // namespace mgt
