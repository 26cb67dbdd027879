#!/usr/bin/env bash
# no_lazy_statics_test.sh LIBRARY
#
# The library initialises nothing through a C++ guard variable (a
# function-local static with a dynamic initialiser or a destructor). A
# fork() while another thread is inside such an initialisation leaves the
# guard "in progress" in the child, whose first call then waits for it
# forever (tests/hardening/fork_first_use_test.cpp shows one case). One-time
# state is constant-initialised or built with pthread_once, which glibc
# restarts in a forked child (runtime/cpu_features.cpp).
set -euo pipefail
# nm's own failure (no such file, not an object) fails the test; and a
# listing without the library's entry point is not the library.
symbols=$(nm -C "$1")
if ! grep -q -w 'moegrad_grad_x' <<<"$symbols"; then
  echo "$1: nm lists no moegrad_grad_x; not the library?" >&2
  exit 1
fi
guards=$(grep -F 'guard variable for' <<<"$symbols" || true)
if [ -n "$guards" ]; then
  echo "$1 has lazily initialised statics, each a hang for a child forked during its initialisation:" >&2
  echo "$guards" >&2
  exit 1
fi
echo "$1: no guard variable"
