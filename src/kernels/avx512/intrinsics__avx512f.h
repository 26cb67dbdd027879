// <immintrin.h> for the AVX-512 kernels, with GCC 12's -Wmaybe-uninitialized
// switched off for the intrinsics headers' own code only.
//
// GCC 12 reports `__Y` in avx512fintrin.h as maybe used uninitialized
// wherever an intrinsic built on _mm512_undefined_*() is inlined (GCC bug
// 105593, fixed in GCC 13): hundreds of reports across these folders, none
// in moegrad's code. A warning is judged by the pragmas in force where its
// line is, so switching it off around the include silences those lines and
// leaves the warning on for everything the kernels themselves write.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
