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
ctest --test-dir build --output-on-failure -j"$jobs"
