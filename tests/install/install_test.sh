#!/usr/bin/env bash
# What `cmake --install` gives a user, used the ways a user would use it:
#
#  1. every component into a temporary prefix; the files listed below are
#     there, and the Runtime component alone brings no headers;
#  2. libmoegrad.so exports exactly the functions the installed headers
#     declare (MOEGRAD_API), no other symbol; libmoegrad.a defines no strong
#     global symbol outside moegrad's names;
#  3. the prefix is moved, and the old path deleted, so nothing may point
#     back to it: the CMake package (find_package(moegrad 0.1); 0.2 is
#     refused; moegrad::moegrad and moegrad::moegrad_static) and the
#     pkg-config file (and the archive linked by hand) still build
#     tests/install/consumer/ (C99 and C++17, -Werror), and every program
#     passes (float64 checks, error statuses), the static ones without
#     loading libmoegrad.so;
#  4. the installed command prints its version, and the installed Python
#     package imports from the prefix, matches a float64 grad_x, and its
#     info() has the keys of `moegrad info --json` (less oneDNN's and the
#     memory `run` and `bench` size their buffers by);
#  5. the command links neither oneDNN nor OpenMP: `bench` loads its oneDNN
#     baseline from the prefix (MOEGRAD_TEST_BENCH_MODULE, set when the build
#     has it); with another version's module, a library without the entry
#     point, or none, it still runs, its oneDNN rows null and the reason on
#     stderr.
#
# usage: install_test.sh BUILD_DIR SOURCE_DIR C_COMPILER [PYTHON PYTHON_DIR]
# (PYTHON: the interpreter the package was built for, PYTHON_DIR where it is
# installed under the prefix; without them, as in a build without the
# Python package, step 4 checks the command only)
set -euo pipefail

build=$1 source=$2 cc=$3 python=${4:-} pydir=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "install_test: $*" >&2
  exit 1
}

# 1. Install, and look at what arrived.
cmake --install "$build" --prefix "$tmp/first" >"$tmp/install.log" || {
  cat "$tmp/install.log" >&2
  fail "cmake --install failed"
}
libdir=$(sed -n 's/^libdir=\${prefix}\///p' "$(find "$tmp/first" -name moegrad.pc)")
[ -n "$libdir" ] || fail "no moegrad.pc, or its libdir is not under the prefix"
version=$(sed -n 's/^Version: //p' "$tmp/first/$libdir/pkgconfig/moegrad.pc")
soname_version=$(echo "$version" | awk -F. '$1 == 0 { print $1 "." $2; next } { print $1 }')
expected=(
  bin/moegrad
  include/moegrad/moegrad.h include/moegrad/moegrad.hpp include/moegrad/moegrad_layer.h
  "$libdir/libmoegrad.so" "$libdir/libmoegrad.so.$soname_version" "$libdir/libmoegrad.so.$version"
  "$libdir/libmoegrad.a"
  "$libdir/cmake/moegrad/moegradConfig.cmake" "$libdir/cmake/moegrad/moegradConfigVersion.cmake"
  "$libdir/cmake/moegrad/moegradTargets.cmake" "$libdir/pkgconfig/moegrad.pc"
)
if [ -n "$python" ]; then
  expected+=("$pydir/moegrad/__init__.py" "$pydir/moegrad/__main__.py" "$pydir/moegrad/torch.py")
fi
module=${MOEGRAD_TEST_BENCH_MODULE:-}
if [ -n "$module" ]; then
  expected+=("$module")
fi
for f in "${expected[@]}"; do
  [ -e "$tmp/first/$f" ] || fail "cmake --install did not install $f"
done
soname=$(objdump -p "$tmp/first/$libdir/libmoegrad.so.$version" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "libmoegrad.so.$soname_version" ] || fail "soname $soname, expected libmoegrad.so.$soname_version"

cmake --install "$build" --prefix "$tmp/runtime" --component Runtime >/dev/null
[ -e "$tmp/runtime/bin/moegrad" ] && [ -e "$tmp/runtime/$libdir/libmoegrad.so.$version" ] ||
  fail "the Runtime component lacks the command or the library"
[ -z "$module" ] || [ -e "$tmp/runtime/$module" ] || fail "the Runtime component lacks $module"
if [ -e "$tmp/runtime/include" ] || [ -e "$tmp/runtime/$libdir/libmoegrad.so" ] ||
  [ -e "$tmp/runtime/$libdir/libmoegrad.a" ]; then
  fail "the Runtime component installed development files"
fi

# 2. Exported functions == the functions the headers declare.
nm -D --defined-only "$tmp/first/$libdir/libmoegrad.so.$version" | awk '{ print $3 }' | sort >"$tmp/exported"
grep -hv '^[[:space:]]*#' "$tmp/first/include/moegrad/"*.h | tr '\n' ' ' | grep -o 'MOEGRAD_API[^(;]*(' |
  sed -E 's/.*[ *](moegrad_[a-z0-9_]+)\($/\1/' | sort -u >"$tmp/declared"
[ -s "$tmp/declared" ] || fail "found no MOEGRAD_API declaration in the installed headers"
if ! diff "$tmp/declared" "$tmp/exported" >"$tmp/abi.diff"; then
  cat "$tmp/abi.diff" >&2
  fail "libmoegrad.so's symbols differ from the headers' functions (< declared only, > exported only)"
fi

# The archive's strong global symbols (weak ones are the standard library's
# template instances, merged by the linker): the C API and moegrad's C++
# names only (moegrad::..., the opaque moegrad_context's members), so that
# it links into a user's program beside any other library.
nm -C -g --defined-only "$tmp/first/$libdir/libmoegrad.a" >"$tmp/archive_symbols"
grep -q ' T moegrad_grad_x$' "$tmp/archive_symbols" || fail "libmoegrad.a does not define moegrad_grad_x"
awk 'NF >= 3 && $2 ~ /^[TDBR]$/' "$tmp/archive_symbols" |
  sed -E 's/^[0-9a-f]+ [TDBR] //; s/^(typeinfo name for|typeinfo for|vtable for|guard variable for|TLS init function for|TLS wrapper function for) //' |
  { grep -v '^moegrad' || true; } >"$tmp/foreign"
[ ! -s "$tmp/foreign" ] || fail "libmoegrad.a defines symbols outside moegrad's names: $(head -5 "$tmp/foreign")"

# 3. Move the prefix, delete the old one, then build and run the consumers.
mv "$tmp/first" "$tmp/moved"
prefix=$tmp/moved
cmake -S "$source/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/consumer.log" 2>&1 || {
  cat "$tmp/consumer.log" >&2
  fail "find_package(moegrad 0.1) failed"
}
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || {
  cat "$tmp/consumer.log" >&2
  fail "the consumer did not build against the CMake package"
}
# Before 1.0 only the same major.minor is compatible (SameMinorVersion).
next_minor=$(echo "$version" | awk -F. '{ print $1 "." $2 + 1 }')
if cmake -S "$source/tests/install/consumer" -B "$tmp/consumer_next" -DCMAKE_PREFIX_PATH="$prefix" \
  -DMOEGRAD_REQUEST="$next_minor" >"$tmp/consumer_next.log" 2>&1; then
  fail "find_package(moegrad $next_minor) accepted moegrad $version"
fi
grep -q "moegradConfig.cmake, version: $version" "$tmp/consumer_next.log" ||
  fail "find_package(moegrad $next_minor) failed for another reason: $(cat "$tmp/consumer_next.log")"
# Linked with the shared library: the installed one, not another on the system.
loads_installed_moegrad() {
  ldd "$1" >"$tmp/ldd"
  grep -q "$prefix/$libdir/libmoegrad.so.$soname_version" "$tmp/ldd" || {
    cat "$tmp/ldd" >&2
    fail "$1 does not load $prefix/$libdir/libmoegrad.so.$soname_version"
  }
}
for exe in consumer_c consumer_cpp; do
  loads_installed_moegrad "$tmp/consumer/$exe"
  "$tmp/consumer/$exe"
done
# Linked with the archive: no libmoegrad.so at all.
no_shared_moegrad() {
  ldd "$1" >"$tmp/ldd"
  if grep -q libmoegrad "$tmp/ldd"; then
    cat "$tmp/ldd" >&2
    fail "$1 loads libmoegrad.so, though linked with libmoegrad.a"
  fi
}
for exe in consumer_c_static consumer_cpp_static; do
  no_shared_moegrad "$tmp/consumer/$exe"
  "$tmp/consumer/$exe"
done
# A C-only project links with the C compiler: the package itself must bring
# the archive's C++ runtime there (CMake adds it only where CXX is enabled).
cmake -S "$source/tests/install/consumer" -B "$tmp/consumer_c_only" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release -DMOEGRAD_CONSUMER_LANGUAGES=C >"$tmp/consumer_c_only.log" 2>&1 &&
  cmake --build "$tmp/consumer_c_only" >>"$tmp/consumer_c_only.log" 2>&1 || {
  cat "$tmp/consumer_c_only.log" >&2
  fail "a C-only project did not build against the CMake package"
}
no_shared_moegrad "$tmp/consumer_c_only/consumer_c_static"
"$tmp/consumer_c_only/consumer_c_static"
loads_installed_moegrad "$tmp/consumer_c_only/consumer_c"
"$tmp/consumer_c_only/consumer_c"

export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
[ "$(pkg-config --modversion moegrad)" = "$version" ] || fail "pkg-config --modversion moegrad"
# shellcheck disable=SC2046  # the flags are words
"$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror -DEXPECTED_VERSION="\"$version\"" \
  "$source/tests/install/consumer/consumer.c" $(pkg-config --cflags --libs moegrad) -lm -o "$tmp/consumer_pc"
LD_LIBRARY_PATH=$prefix/$libdir "$tmp/consumer_pc"
# examples/grad_x.c with the command its header comment gives.
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror "$source/examples/grad_x.c" $(pkg-config --cflags --libs moegrad) \
  -o "$tmp/grad_x_example"
LD_LIBRARY_PATH=$prefix/$libdir "$tmp/grad_x_example" > "$tmp/grad_x_example.out" ||
  fail "examples/grad_x.c built through pkg-config: $(cat "$tmp/grad_x_example.out")"
# The archive by hand, as the README gives it: a C program needs the C++
# runtime and threads beside it.
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror "$source/tests/install/consumer/consumer.c" \
  $(pkg-config --cflags moegrad) "$prefix/$libdir/libmoegrad.a" -lstdc++ -lm -lpthread -o "$tmp/consumer_a"
no_shared_moegrad "$tmp/consumer_a"
"$tmp/consumer_a"
# The same libraries from `pkg-config --static` (Libs.private), as a build
# system that links the archive asks for them, with the archive chosen
# over the shared library by -Bstatic around -lmoegrad alone.
static_libs=$(pkg-config --static --libs moegrad)
case " $static_libs " in
  *" -lmoegrad -lstdc++ -lm -lpthread -Wl,-z,nodelete "*) ;;
  *) fail "pkg-config --static --libs moegrad: $static_libs" ;;
esac
# shellcheck disable=SC2046,SC2086
"$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror "$source/tests/install/consumer/consumer.c" \
  $(pkg-config --cflags moegrad) ${static_libs/-lmoegrad/-Wl,-Bstatic -lmoegrad -Wl,-Bdynamic} \
  -o "$tmp/consumer_pc_static"
no_shared_moegrad "$tmp/consumer_pc_static"
"$tmp/consumer_pc_static"
# ... and, being position-independent, into a shared library of the user's,
# which pkg-config's flags keep mapped after dlclose (README).
# shellcheck disable=SC2046,SC2086
"$cc" -std=c99 -shared -fPIC "$source/tests/install/consumer/consumer.c" $(pkg-config --cflags moegrad) \
  ${static_libs/-lmoegrad/-Wl,-Bstatic -lmoegrad -Wl,-Bdynamic} -o "$tmp/libconsumer_a.so" ||
  fail "libmoegrad.a does not link into a shared library"
readelf -d "$tmp/libconsumer_a.so" | grep -q 'Flags:.*NODELETE' ||
  fail "a shared library linking libmoegrad.a with pkg-config --static's flags is not NODELETE"

# 4. The command and the Python package.
[ "$("$prefix/bin/moegrad" --version)" = "moegrad $version" ] || fail "bin/moegrad --version"
if [ -n "$python" ]; then
  PYTHONPATH=$prefix/$pydir "$python" - "$prefix" <<'EOF'
import sys

import numpy as np

import moegrad

prefix = sys.argv[1]
assert moegrad.__file__.startswith(prefix), f"imported {moegrad.__file__}, not the installed package"
rng = np.random.default_rng(3)
batch, top_k, experts, k, n = 5, 2, 3, 7, 6
grad_y = rng.standard_normal((batch * top_k, n)).astype(np.float32)
weight = rng.standard_normal((experts, k, n)).astype(np.float32)
row_idx = np.arange(batch * top_k, dtype=np.int64)[::-1].copy()  # expanded row i holds slot 9 - i
counts = np.array([4, 0, 6], dtype=np.int64)
got = moegrad.grad_x(grad_y, weight, row_idx, counts, batch, top_k)
expert = np.repeat(np.arange(experts), counts)
ref = np.zeros((batch, k))
terms = np.zeros((batch, k))
for i in range(batch * top_k):
    t = weight[expert[i]].astype(np.float64) * grad_y[i].astype(np.float64)
    ref[row_idx[i] // top_k] += t.sum(axis=1)
    terms[row_idx[i] // top_k] += np.abs(t).sum(axis=1)
assert np.all(np.abs(got - ref) <= (n + top_k) * 2.0**-24 * terms), "grad_x is outside the bound"
print(f"python: moegrad from {prefix} OK")
EOF
  # moegrad.info() has the keys of `moegrad info --json` but the oneDNN ones
  # and the memory ones, which are the command's (the README says so).
  cli_keys=$("$prefix/bin/moegrad" info --json |
    "$python" -c 'import json, sys; print(sorted(k for k in json.load(sys.stdin)
                                                  if not k.startswith("onednn") and "memory" not in k))')
  py_keys=$(PYTHONPATH=$prefix/$pydir "$python" -c 'import moegrad; print(sorted(moegrad.info()))')
  [ "$cli_keys" = "$py_keys" ] ||
    fail "moegrad.info() keys $py_keys, moegrad info --json (less oneDNN and memory) $cli_keys"
fi

# 5. The command needs no benchmark dependency to start; bench finds its
# oneDNN module in the moved prefix, or runs without it.
if objdump -p "$prefix/bin/moegrad" | grep -E 'NEEDED +lib(dnnl|gomp)'; then
  fail "bin/moegrad links a benchmark-only library"
fi
bench=(--shape 16,2,3,48,32 --dtype f32 --threads 1 --reps 1 --json)
# The oneDNN row's "ms": a number, or null.
onednn_ms() {
  "$prefix/bin/moegrad" bench "${bench[@]}" 2>"$tmp/bench.err" |
    grep -o '"path": "onednn-nonfused", "ms": [^,]*' | sed 's/.*"ms": //'
}
# Without a usable module: bench succeeds, the oneDNN row is null, and
# stderr says why.
# $1: what is in the module's place; $2: the reason bench must give.
refused_module() {
  local ms
  ms=$(onednn_ms) || fail "bench failed with $1: $(cat "$tmp/bench.err")"
  [ "$ms" = null ] || fail "bench with $1 gave oneDNN ms '$ms'"
  grep -q "onednn-nonfused f32: null: .*$2" "$tmp/bench.err" ||
    fail "bench with $1 did not say '$2': $(cat "$tmp/bench.err")"
}
if [ -n "$module" ]; then
  ms=$(onednn_ms) || fail "bench failed: $(cat "$tmp/bench.err")"
  [[ "$ms" =~ ^[0-9] ]] || fail "bench did not run oneDNN from $prefix/$module (ms: '$ms')"
  # Stand-ins in its place: another moegrad version's module (its table
  # starts with that version), and a library without the entry point.
  printf '%s\n' 'static const char* const api[4] = {"9.9.9", 0, 0, 0};' \
    'const void* moegrad_bench_onednn_module_v2(void) { return api; }' >"$tmp/other_version.c"
  "$cc" -shared -fPIC "$tmp/other_version.c" -o "$prefix/$module"
  refused_module "another version's module" "belongs to moegrad 9.9.9, not $version"
  echo 'int not_the_entry_point(void) { return 0; }' >"$tmp/no_entry.c"
  "$cc" -shared -fPIC "$tmp/no_entry.c" -o "$prefix/$module"
  refused_module "a module without its entry point" "has no moegrad_bench_onednn_module_v2"
  # This version's module of the API's previous layout (create only): the
  # entry point's number tells them apart, the version cannot.
  printf '%s\n' "static const char* const api[3] = {\"$version\", 0, 0};" \
    'const void* moegrad_bench_onednn_module_v1(void) { return api; }' >"$tmp/old_layout.c"
  "$cc" -shared -fPIC "$tmp/old_layout.c" -o "$prefix/$module"
  refused_module "a module of the previous layout" "has no moegrad_bench_onednn_module_v2"
  rm "$prefix/$module"
  refused_module "no module" "the oneDNN module did not load"
else
  refused_module "a build without oneDNN" "this build has no oneDNN"
fi
echo "install_test: OK (moegrad $version, prefix moved before use)"
