#!/usr/bin/env bash
# Sanitizer runs of the C++ test suite (issue #5). Exits non-zero on any
# failure or sanitizer report.
#
#   build-asan/  every C++ test (ctest) under AddressSanitizer +
#                UndefinedBehaviorSanitizer, LeakSanitizer included
#   build-tsan/  the multithreaded tests under ThreadSanitizer (our pool is
#                std::thread + mutex/condition_variable, which TSan models;
#                there is no OpenMP in the library)
#
# Both builds are -O1 -g with assertions on. Knobs (environment):
#   MOEGRAD_SANITIZER_CXX / _CC   compiler (default g++ / gcc)
#   MOEGRAD_ASAN_EXCLUDE          ctest -E regex of tests to skip under ASan
#                                 (default: none; the whole suite takes ~1.5 min)
#   MOEGRAD_TSAN_TESTS            ctest -R regex of the TSan run
#   MOEGRAD_SANITIZERS            "asan tsan" (default), or one of them
#   MOEGRAD_TSAN_SUITE_BUILD      a build directory holding the whole test
#                                 suite, built from this tree (scripts/test.sh
#                                 passes build/): the TSan run then fails if a
#                                 test there that matches the regex is not in
#                                 build-tsan
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
ensure_packages "${MOEGRAD_BUILD_PACKAGES[@]}" googletest libgtest-dev libgmock-dev \
  libasan8 libubsan1 libtsan2

jobs=$(nproc)
status=0  # both runs happen; any failure fails the script at the end
cxx=${MOEGRAD_SANITIZER_CXX:-g++}
cc=${MOEGRAD_SANITIZER_CC:-gcc}
which=${MOEGRAD_SANITIZERS:-asan tsan}
# Multithreaded tests: the hardening concurrency suite, determinism over
# thread counts, concurrent runs on one context, thread-local errors.
tsan_tests=${MOEGRAD_TSAN_TESTS:-'Concurrency\.|Determinism\.|ThreadLocal|EveryThreadCount|ConcurrentRuns|NoAllocation\.|ThreadPool\.'}

configure() {  # dir sanitizers
  CC=$cc CXX=$cxx cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" \
    -DMOEGRAD_SANITIZE="$2" -DMOEGRAD_BUILD_TESTS=ON -DMOEGRAD_BUILD_PYTHON=OFF \
    -DMOEGRAD_BUILD_BENCH=OFF -DMOEGRAD_BUILD_FUZZ=OFF >/dev/null
}

build() {  # dir [cmake --build args]: quiet unless it fails
  local dir=$1
  shift
  cmake --build "$dir" -j"$jobs" "$@" >"$dir/build.log" 2>&1 || { tail -n 40 "$dir/build.log" >&2; exit 1; }
}

if [[ " $which " == *" asan "* ]]; then
  echo "== ASan+UBSan: build-asan/" >&2
  configure build-asan address,undefined
  build build-asan
  export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  ctest --test-dir build-asan --output-on-failure -j"$(test_jobs build-asan/bin/moegrad)" --timeout 600 --no-tests=error \
    ${MOEGRAD_ASAN_EXCLUDE:+-E "$MOEGRAD_ASAN_EXCLUDE"} || status=1
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

if [[ " $which " == *" tsan "* ]]; then
  echo "== TSan: build-tsan/ (tests matching: $tsan_tests)" >&2
  configure build-tsan thread
  # Only the test binaries that hold multithreaded tests (those that exist).
  targets=()
  available=$(cmake --build build-tsan --target help)
  for t in moegrad_hardening_test moegrad_no_alloc_test grad_x_determinism_test api_test ops_test thread_pool_test \
    nonfused_grad_x_test; do
    if grep -qE "^\.\.\. $t( |$)" <<<"$available"; then targets+=("$t"); fi
  done
  build build-tsan --target "${targets[@]}"
  # A test binary missing from that list would drop its tests from the run
  # unseen (an unbuilt binary lists no tests). Given a build of the whole,
  # current suite, every matching test there that build-tsan can build (not
  # the bench's, which it leaves out) must be here too.
  if [ -n "${MOEGRAD_TSAN_SUITE_BUILD:-}" ]; then
    list_tests() {
      ctest --test-dir "$1" -N -R "$tsan_tests" -LE bench | sed -n 's/^ *Test *#[0-9]*: //p' | LC_ALL=C sort
    }
    suite=$(list_tests "$MOEGRAD_TSAN_SUITE_BUILD")
    missing=$(LC_ALL=C comm -23 <(printf '%s\n' "$suite") <(list_tests build-tsan))
    if [ -z "$suite" ]; then
      echo "TSan: $MOEGRAD_TSAN_SUITE_BUILD lists no test matching $tsan_tests: is it built?" >&2
      status=1
    elif [ -n "$missing" ]; then
      printf 'TSan: tests matching %s that build-tsan does not build:\n%s\n' "$tsan_tests" "$missing" >&2
      status=1
    fi
  fi
  # halt_on_error: the first race fails the test; exitcode 66 marks TSan.
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:exitcode=66 \
    ctest --test-dir build-tsan --output-on-failure -j"$(test_jobs build/bin/moegrad)" --timeout 600 --no-tests=error -R "$tsan_tests" ||
    status=1
fi
exit $status
