#!/usr/bin/env bash
# Every C++ test binary again on emulated CPUs that lack what this one may
# have (qemu-user, Debian's qemu-user package): "Haswell" has AVX2, FMA and
# F16C but no AVX-512, so the library must choose its avx2 path; "Nehalem"
# has no AVX at all, so only the scalar path runs. CI and users land on such
# CPUs: this catches an AVX-512 instruction outside the kernels compiled for
# it (SIGILL), a dispatch that picks a path the CPU lacks, and a test that
# assumes the development machine's CPU instead of skipping what it lacks.
# The Python tests run on the Haswell model too.
#
# Uses the Release build in build/ (scripts/test.sh builds it first). The
# large-token accuracy tests (Seed/LargeTokens: 221184 rows on the default
# path, the same dispatch as every other test) are left out: emulated, each
# takes 0.5-6 minutes. So are the fork tests (Fork.*, ForkFirstUse.*,
# Python's "forked"): qemu-user 7.2 itself aborts in a child forked from a
# multithreaded guest (qemu_plugin_vcpu_init_hook assertion), before any
# moegrad code runs; they run natively in ctest and under the sanitizers.
# And the tests of buffers too large for a capped address space or data
# size: qemu-user holds its guest to neither RLIMIT_AS nor RLIMIT_DATA (the
# allocation they are about succeeds wherever memory allows it, and filling
# it takes minutes emulated). And the bench's peak RSS test: qemu-user 7.2
# ignores madvise, so heap pages glibc hands back stay resident.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
ensure_packages qemu-user
[ -x build/bin/api_test ] || { echo "test_cpus.sh: run scripts/test.sh first (no build/bin/api_test)" >&2; exit 1; }

# QEMU's CPU models, less the features its emulator (TCG) lacks, which it
# would otherwise warn about on stderr at every thread start (and some
# tests check stderr).
haswell="Haswell-v4,-pcid,-x2apic,-tsc-deadline,-invpcid,-spec-ctrl"
skipped="Seed/LargeTokens.*:Fork.*:ForkFirstUse.*:CliTest.ARoutingTooLargeForMemorySaysSo"
skipped+=":GradXErrorTest.AnOutputTooLargeForMemoryNamesItsShape"
skipped+=":GradXErrorTest.AShapeErrorIsReportedBeforeGradXIsGivenMemory"
skipped+=":CliTest.ARunTooLargeForMemoryFailsOnItsTensorsBeforeBuildingItsRouting"
skipped+=":BenchCommand.EachPathsPeakRssCountsOnlyWhatItHolds"
tests=(build/bin/*_test)

# on_cpu MODEL PATH: every test binary on the emulated MODEL, whose best
# path is PATH; 0 if all passed. Logs in build/cpu_PATH_*.log.
on_cpu() {
  local name=${1%%[-,]*} ok=1 got t log
  export QEMU_CPU=$1
  got=$(qemu-x86_64 build/bin/moegrad run --batch 8 --top-k 2 --experts 2 --k 16 --n 8 --json |
        sed -n 's/.*"isa": *"\([a-z0-9]*\)".*/\1/p') || got="(moegrad run failed)"
  if [ "$got" != "$2" ]; then
    echo "test_cpus.sh: on the emulated $name CPU the library chose '$got', not $2" >&2
    ok=0
  fi
  for t in "${tests[@]}"; do
    log="build/cpu_${2}_${t##*/}.log"
    if ! qemu-x86_64 "$t" --gtest_brief=1 --gtest_filter="-$skipped" >"$log" 2>&1; then
      echo "test_cpus.sh: $t failed on the emulated $name CPU:" >&2
      grep -a -B3 -A12 -E "Failure|FAILED|Illegal|signal" "$log" | head -n 80 >&2 || tail -n 20 "$log" >&2
      ok=0
    fi
  done
  if [ "$2" = avx2 ]; then
    log=build/cpu_avx2_python.log
    if ! PYTHONPATH=build/python qemu-x86_64 /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests \
        -k "not forked" >"$log" 2>&1; then
      echo "test_cpus.sh: the Python tests failed on the emulated $name CPU:" >&2
      tail -n 40 "$log" >&2
      ok=0
    fi
  fi
  [ "$ok" -eq 1 ] || return 1
  echo "test_cpus.sh: every test passed on the emulated $name CPU ($2 path)"
}

# The two models side by side (each test binary is mostly one thread).
on_cpu "$haswell" avx2 &
avx2_job=$!
on_cpu Nehalem scalar &
scalar_job=$!
failed=0
wait "$avx2_job" || failed=1
wait "$scalar_job" || failed=1
exit "$failed"
