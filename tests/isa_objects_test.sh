#!/usr/bin/env bash
# isa_objects_test.sh NAMESPACE OBJECT...
#
# The objects of one ISA folder (compiled with that ISA's -m flags) must
# define no function that the linker could pick in place of another
# translation unit's copy, and no global symbol outside their own namespace.
# An inline function or template instance (std::fill, a helper in a shared
# header) that a kernel file emits out of line is a weak symbol: the linker
# keeps any one of its copies, possibly the one with AVX-512 instructions,
# and code running on an AVX2-only CPU would then die of SIGILL. This checks
# it on every CPU, where scripts/test_cpus.sh only catches the copies the
# linker happened to keep.
set -euo pipefail
ns=$1
shift
bad=$(nm -C --defined-only "$@" | awk -v ns="moegrad::kernels::$ns::" '
  NF < 3 { next }
  {
    type = $2
    name = $0
    sub(/^[^ ]* [^ ]* /, "", name)
    if (name ~ /^__(odr_asan|asan|tsan|ubsan|sancov)/) next   # sanitizer instrumentation (ASan/TSan builds)
    if (type ~ /^[Vvu]$/) next                        # weak or unique data (typeinfo, DW.ref): no code
    if (type ~ /^[Ww]$/) { print "weak: " name; next }
    if (type ~ /^[TDBRG]$/ && index(name, ns) != 1) print "global outside " ns ": " name
  }')
if [ -n "$bad" ]; then
  echo "objects of the $ns kernels define symbols that could leak their ISA:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "$# $ns objects: no weak function, every global symbol in moegrad::kernels::$ns"
