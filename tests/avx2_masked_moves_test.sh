#!/usr/bin/env bash
# avx2_masked_moves_test.sh SOURCE_DIR
#
# VMASKMOV (_mm256_maskload_ps, _mm256_maskstore_ps and their kin) may
# fault on masked-off lanes on AMD CPUs, by AMD's manual. The library uses
# it only through kernels/avx2/masked__avx2.h, which keeps each such access
# within one page. page_end_tails_test checks the kernels' results at a
# mapping's end, but on a CPU whose masked-off lanes never fault (every
# Intel one, the Zen 5 this was written on) it cannot see a VMASKMOV added
# elsewhere: this does. (AVX-512's k-masked moves, _mm512_mask_* and
# _mm256_mask_*, suppress such faults by definition and are not matched.)
set -euo pipefail
src=$1
helper="$src/kernels/avx2/masked__avx2.h"
pattern='_mm(256)?_mask(load|store)_(ps|pd|epi32|epi64)'
# The pattern finds the helper's own use, or it would find nothing anywhere.
grep -qE "$pattern" "$helper"
hits=$(grep -rnE "$pattern" "$src" --include='*.cpp' --include='*.h' --include='*.inc' |
  grep -vF "$helper:" || true)
if [ -n "$hits" ]; then
  echo "VMASKMOV outside $helper (use load_first/store_first):" >&2
  echo "$hits" >&2
  exit 1
fi
echo "$src: VMASKMOV only in $helper"
