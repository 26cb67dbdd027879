#!/bin/sh
# The public headers in every language mode a consumer may build in, with
# -Wall -Wextra -Wpedantic -Werror:
#  - moegrad.h and moegrad_layer.h as C89 (ISO and GNU) to C17, and as C++98
#    to C++20 with or without exceptions: the C API everywhere;
#  - moegrad_layer.h's C++ wrappers (and moegrad.hpp) from C++14 on with
#    exceptions, also where it is included inside extern "C", absent
#    otherwise or under MOEGRAD_NO_CXX_API;
#  - moegrad.hpp alone below C++14 or without exceptions: one #error that
#    says why and points at moegrad.h.
# usage: header_modes_test.sh CC CXX INCLUDE_DIR
set -eu
cc=$1 cxx=$2 include=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
fail() {
  echo "header_modes_test: FAILED: $1" >&2
  failed=1
}

cat >"$dir/c_api.c" <<'SRC'
#include <moegrad/moegrad.h>
#include <moegrad/moegrad_layer.h>
int main(void) { return moegrad_status_string(MOEGRAD_STATUS_SUCCESS) == 0; }
SRC
cp "$dir/c_api.c" "$dir/c_api.cpp"
cat >"$dir/wrappers.cpp" <<'SRC'
#include <moegrad/moegrad_layer.h>
int main() { return sizeof(moegrad::OpExecutor) == 0; }
SRC
printf '#include <moegrad/moegrad.hpp>\nint main() { return 0; }\n' >"$dir/hpp.cpp"
# A C header included the legacy way, inside extern "C": its C++ part
# (standard headers with templates) must still compile.
cat >"$dir/extern_c.cpp" <<'SRC'
extern "C" {
#include <moegrad/moegrad_layer.h>
}
int main() { return sizeof(moegrad::OpExecutor) == 0; }
SRC

compiles() { # compiler, flags..., source: quietly, into $dir/log
  "$@" -Wall -Wextra -Wpedantic -Werror -I"$include" -fsyntax-only >"$dir/log" 2>&1
}

for std in c89 gnu89 c99 gnu99 c11 gnu11 c17 gnu17; do
  compiles "$cc" -std=$std "$dir/c_api.c" || fail "the C API as $std: $(head -3 "$dir/log")"
done
for std in c++98 c++11 c++14 c++17 c++20; do
  for exceptions in -fexceptions -fno-exceptions; do
    compiles "$cxx" -std=$std $exceptions "$dir/c_api.cpp" || fail "the C API as $std $exceptions: $(head -3 "$dir/log")"
    wrappers=no
    [ $exceptions = -fexceptions ] && [ $std != c++98 ] && [ $std != c++11 ] && wrappers=yes
    if compiles "$cxx" -std=$std $exceptions "$dir/wrappers.cpp"; then got=yes; else got=no; fi
    [ $got = $wrappers ] || fail "moegrad::OpExecutor as $std $exceptions: expected '$wrappers', got '$got'"
  done
done
for std in c++14 c++17 c++20; do
  compiles "$cxx" -std=$std "$dir/extern_c.cpp" || fail "moegrad_layer.h inside extern \"C\" as $std: $(head -3 "$dir/log")"
done
if compiles "$cxx" -std=c++17 -DMOEGRAD_NO_CXX_API "$dir/wrappers.cpp"; then
  fail "MOEGRAD_NO_CXX_API left the C++ wrappers in"
fi
compiles "$cxx" -std=c++17 -DMOEGRAD_NO_CXX_API "$dir/c_api.cpp" || fail "the C API under MOEGRAD_NO_CXX_API"

expect_error() { # what the #error must say, flags...
  want=$1
  shift
  if compiles "$cxx" "$@" "$dir/hpp.cpp"; then
    fail "moegrad.hpp compiled with $*"
  elif ! grep -q "#error.*$want" "$dir/log"; then
    fail "moegrad.hpp with $*: no #error saying '$want': $(head -3 "$dir/log")"
  fi
}
expect_error "needs C++14" -std=c++11
expect_error "exceptions" -std=c++17 -fno-exceptions
compiles "$cxx" -std=c++14 "$dir/hpp.cpp" || fail "moegrad.hpp as C++14: $(head -3 "$dir/log")"

[ $failed = 0 ] || exit 1
echo "header_modes_test: passed ($cc, $cxx)"
