// Encoding and decoding of IEEE binary16 (f16) and bfloat16, written from the
// format definitions (sign | biased exponent | fraction) with ldexp/frexp, on
// purpose without sharing code or technique with the library's widening.
#pragma once

#include <cstdint>

namespace mgt {

// Exact widening: every f16 and bf16 value (denormals included) is an f32.
float f16_bits_to_float(uint16_t bits);
float bf16_bits_to_float(uint16_t bits);

// Round-to-nearest-even narrowing (overflow gives infinity, NaN stays NaN).
uint16_t float_to_f16_bits(float value);
uint16_t float_to_bf16_bits(float value);

uint32_t float_bits(float value);
float bits_float(uint32_t bits);

}  // namespace mgt
