#!/usr/bin/env bash
# Fresh Debian 12 -> Release build in build/ -> `moegrad run` (the main job).
# Extra arguments go to `moegrad run`, e.g. scripts/run.sh --dtype bf16.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
ensure_packages "${MOEGRAD_BUILD_PACKAGES[@]}"
# A build/ that scripts/test.sh (or a developer) configured keeps its
# options: turning its tests off would leave their old binaries and ctest
# files behind, and a later `ctest` would run those against an old library.
if [ -f build/CMakeCache.txt ]; then
  cmake -S . -B build >/dev/null
else
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
    -DMOEGRAD_BUILD_TESTS=OFF -DMOEGRAD_BUILD_BENCH=OFF -DMOEGRAD_BUILD_PYTHON=OFF >/dev/null
fi
cmake --build build -j"$(nproc)" --target moegrad_cli >/dev/null
exec build/bin/moegrad run "$@"
