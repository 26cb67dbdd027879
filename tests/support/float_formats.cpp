#include "float_formats.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace mgt {
namespace {

// A binary floating-point format with `exp_bits` exponent bits and
// `frac_bits` stored fraction bits (f16: 5/10, bf16: 8/7).
struct Format {
  int exp_bits;
  int frac_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint32_t exp_all_ones() const { return (1u << exp_bits) - 1; }
};

constexpr Format kF16{5, 10};
constexpr Format kBF16{8, 7};

double decode(uint32_t bits, Format f) {
  const bool negative = ((bits >> (f.exp_bits + f.frac_bits)) & 1u) != 0;
  const uint32_t biased = (bits >> f.frac_bits) & f.exp_all_ones();
  const uint32_t frac = bits & ((1u << f.frac_bits) - 1);
  double magnitude;
  if (biased == f.exp_all_ones()) {
    magnitude = frac != 0 ? std::numeric_limits<double>::quiet_NaN()
                          : std::numeric_limits<double>::infinity();
  } else if (biased == 0) {  // zero or subnormal: frac * 2^(1 - bias - frac_bits)
    magnitude = std::ldexp(static_cast<double>(frac), 1 - f.bias() - f.frac_bits);
  } else {  // (2^frac_bits + frac) * 2^(biased - bias - frac_bits)
    magnitude = std::ldexp(static_cast<double>((1u << f.frac_bits) + frac),
                           static_cast<int>(biased) - f.bias() - f.frac_bits);
  }
  return negative ? -magnitude : magnitude;
}

uint32_t encode(double x, Format f) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.exp_bits + f.frac_bits) : 0u;
  const uint32_t inf = f.exp_all_ones() << f.frac_bits;
  if (std::isnan(x)) return sign | inf | (1u << (f.frac_bits - 1));
  const double a = std::fabs(x);
  if (a == 0.0) return sign;
  if (std::isinf(a)) return sign | inf;
  int e = 0;
  (void)std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): leading bit has weight 2^(e-1)
  const int emin = 1 - f.bias();
  int lead = e - 1 < emin ? emin : e - 1;
  // a in units of the last fraction bit at exponent `lead`, rounded to nearest even.
  auto units = static_cast<uint64_t>(std::nearbyint(std::ldexp(a, f.frac_bits - lead)));
  if (units >= (uint64_t{2} << f.frac_bits)) {  // rounding carried into the next binade
    units >>= 1;
    ++lead;
  }
  if (units < (uint64_t{1} << f.frac_bits)) return sign | static_cast<uint32_t>(units);  // subnormal
  const int biased = lead + f.bias();
  if (biased >= static_cast<int>(f.exp_all_ones())) return sign | inf;
  return sign | (static_cast<uint32_t>(biased) << f.frac_bits) |
         static_cast<uint32_t>(units - (uint64_t{1} << f.frac_bits));
}

}  // namespace

float f16_bits_to_float(uint16_t bits) { return static_cast<float>(decode(bits, kF16)); }
float bf16_bits_to_float(uint16_t bits) { return static_cast<float>(decode(bits, kBF16)); }
uint16_t float_to_f16_bits(float value) { return static_cast<uint16_t>(encode(value, kF16)); }
uint16_t float_to_bf16_bits(float value) { return static_cast<uint16_t>(encode(value, kBF16)); }

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace mgt
