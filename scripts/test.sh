#!/usr/bin/env bash
# Fresh Debian 12 -> Release build in build/ -> every test. Exits non-zero on
# any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
ensure_packages "${MOEGRAD_BUILD_PACKAGES[@]}" "${MOEGRAD_TEST_PACKAGES[@]}"

jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMOEGRAD_BUILD_TESTS=ON -DMOEGRAD_BUILD_BENCH=ON \
  -DMOEGRAD_BUILD_PYTHON=ON >/dev/null
cmake --build build -j"$jobs" >/dev/null
ctest --test-dir build --output-on-failure -j"$(test_jobs build/bin/moegrad)"

# Robustness (README "Robustness"): sanitizers, fuzzers, valgrind. Each
# script builds in its own directory and fails on any report.
MOEGRAD_TSAN_SUITE_BUILD=build scripts/test_sanitizers.sh  # ASan+UBSan: every C++ test; TSan: the multithreaded ones
scripts/test_fuzz.sh         # fuzz_grad_x, fuzz_ops and fuzz_npy, fixed runs and seed
scripts/test_valgrind.sh     # a small case under valgrind memcheck
scripts/test_cpus.sh         # the tests on emulated CPUs without AVX-512 / without AVX (qemu-user)
