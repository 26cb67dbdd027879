#!/usr/bin/env bash
# A small grad-x case under valgrind memcheck (issue #5): workspace and grad_x
# come straight from malloc, never written by the test, and the test branches
# on every result element, so a result computed from uninitialised memory, an
# invalid read/write or a definite leak fails the run. Plain (unsanitized)
# RelWithDebInfo build in build-hard/. valgrind has no AVX-512: its CPU model
# makes the library pick AVX2 (and the test forces the scalar path too).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
ensure_packages "${MOEGRAD_BUILD_PACKAGES[@]}" googletest libgtest-dev libgmock-dev valgrind

cmake -S . -B build-hard -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOEGRAD_BUILD_TESTS=ON \
  -DMOEGRAD_BUILD_PYTHON=OFF -DMOEGRAD_BUILD_BENCH=OFF -DMOEGRAD_BUILD_FUZZ=OFF >/dev/null
cmake --build build-hard -j"$(nproc)" --target moegrad_hardening_test >build-hard/build.log 2>&1 ||
  { tail -n 40 build-hard/build.log >&2; exit 1; }
# The filter must match: a renamed suite would otherwise pass having run nothing.
listed=$(build-hard/bin/moegrad_hardening_test --gtest_list_tests --gtest_filter='Valgrind.*')
grep -q '^  ' <<<"$listed" || { echo "test_valgrind.sh: no test matches Valgrind.*" >&2; exit 1; }
valgrind --tool=memcheck --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
  --show-leak-kinds=definite --track-origins=yes --quiet \
  build-hard/bin/moegrad_hardening_test --gtest_filter='Valgrind.*' --gtest_brief=1
