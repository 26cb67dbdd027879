#!/usr/bin/env bash
# The source distribution (`setup.py sdist`, MANIFEST.in) as a user who
# downloads it builds it with CMake alone: it holds no tests/, configures
# with no options (the test suite off by default), refuses
# MOEGRAD_BUILD_TESTS=ON saying why, and builds a `moegrad` command whose
# `run` computes and checks a small grad_x.
#
# usage: sdist_test.sh SOURCE_DIR PYTHON
set -euo pipefail

source=$1 python=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "sdist_test: $*" >&2
  exit 1
}

# setup.py puts its egg-info into the source tree's build-python/.
(cd "$source" && "$python" setup.py -q sdist -d "$tmp/dist") >"$tmp/sdist.log" 2>&1 || {
  cat "$tmp/sdist.log" >&2
  fail "setup.py sdist failed"
}
archives=("$tmp"/dist/moegrad-*.tar.gz)
[ "${#archives[@]}" -eq 1 ] && [ -f "${archives[0]}" ] || fail "expected one moegrad-*.tar.gz, got: ${archives[*]}"
mkdir "$tmp/src"
tar -xzf "${archives[0]}" -C "$tmp/src"
tree=$(find "$tmp/src" -mindepth 1 -maxdepth 1 -type d)
[ -f "$tree/CMakeLists.txt" ] || fail "the sdist has no CMakeLists.txt at its top"
[ ! -e "$tree/tests" ] || fail "the sdist ships tests/ (MANIFEST.in leaves it out)"

cmake -S "$tree" -B "$tmp/tests_on" -DMOEGRAD_BUILD_TESTS=ON >"$tmp/tests_on.log" 2>&1 &&
  fail "configuring the sdist with MOEGRAD_BUILD_TESTS=ON succeeded without tests/"
grep -q "this source tree has no tests/" "$tmp/tests_on.log" || {
  cat "$tmp/tests_on.log" >&2
  fail "MOEGRAD_BUILD_TESTS=ON on the sdist did not say why it failed"
}

# Plain: no option but those that keep the build short.
cmake -S "$tree" -B "$tmp/build" -DMOEGRAD_BUILD_BENCH=OFF -DMOEGRAD_BUILD_PYTHON=OFF >"$tmp/configure.log" 2>&1 || {
  cat "$tmp/configure.log" >&2
  fail "configuring the sdist with no options failed"
}
grep -qx "MOEGRAD_BUILD_TESTS:BOOL=OFF" "$tmp/build/CMakeCache.txt" || fail "the test suite is not off by default"
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build "$tmp/build" --target moegrad_cli -j "$jobs" >"$tmp/build.log" 2>&1 || {
  tail -n 40 "$tmp/build.log" >&2
  fail "building the command from the sdist failed"
}
# `run` checks its result against a float64 reference and fails otherwise.
"$tmp/build/bin/moegrad" run --batch 16 --top-k 2 --experts 3 --k 24 --n 20 >"$tmp/run.log" 2>&1 || {
  cat "$tmp/run.log" >&2
  fail "moegrad run, built from the sdist, failed"
}
echo "sdist_test: OK ($(basename "${archives[0]}"))"
