// The one NaN moegrad stores. IEEE 754 lets an operation whose operands
// hold two NaNs return either one, and the paths differ in which: glibc's
// fmaf and the FMA instruction favour different operands, and which
// register holds which operand of an FMA or an add is each kernel's
// compiler's choice. An invalid operation (inf * 0, inf - inf) gives x86's
// negative default NaN. So SPEC §5's "bitwise identical" holds for NaN
// elements only if each is stored as one fixed pattern: positive, quiet,
// payload zero (numpy's np.nan; f16 0x7e00 and bf16 0x7fc0 after
// narrowing). Which elements are NaN is the same on every path, and a NaN
// stays NaN through every later add, so replacing it at each store of a
// sum into an output is enough.
#pragma once

#include <bit>
#include <cstdint>

namespace moegrad {

inline constexpr uint32_t kCanonicalNanBits = 0x7fc00000u;

// Internal linkage: each ISA's translation units get their own copy, so the
// linker cannot pick one compiled with another ISA's flags.
namespace {
inline float canonical_nan(float v) { return v != v ? std::bit_cast<float>(kCanonicalNanBits) : v; }
}  // namespace

}  // namespace moegrad
