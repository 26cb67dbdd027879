#!/bin/sh
# A real cgroup CPU limit narrows the default thread count. In a new cgroup
# with a quota of one CPU, and in an unlimited cgroup below it (the kernel
# enforces the parent's quota there too), `moegrad info --json` must report
# the limit and one thread; with a quota of 2.5 CPUs, 3 threads or the
# affinity count if smaller. Needs root and a writable cpu controller: cgroup
# v1, or v2 with the process in the root cgroup and `cpu` in the root's
# cgroup.subtree_control. Exits 77 (skipped) where it cannot make one.
#
# usage: cgroup_limit_test.sh path/to/moegrad
set -eu
moegrad=$1
unset MOEGRAD_NUM_THREADS

. "$(dirname "$0")/test_cgroup.sh"

# The expected values assume no limit above the new cgroup.
case $("$moegrad" info --json) in
  *'"cgroup_cpu_limit": null,'*) ;;
  *) skip "this process's cgroup already has a CPU limit" ;;
esac
make_test_cgroup cpu
if [ -n "$v1" ]; then
  set_quota() { # CPUs as quota/period, in microseconds
    period=$(cat "$1/cpu.cfs_period_us")
    echo "$(awk -v c="$2" -v p="$period" 'BEGIN { printf "%d", c * p }')" >"$1/cpu.cfs_quota_us"
  }
else
  set_quota() {
    echo "$(awk -v c="$2" 'BEGIN { printf "%d", c * 100000 }') 100000" >"$1/cpu.max"
  }
fi
set_quota "$dir" 1 2>/dev/null || skip "cannot set a quota on $dir"

# moegrad info --json, run by a shell that first moves itself into cgroup $1.
info_in() {
  sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" info --json' sh "$1" "$moegrad" || fail "moegrad info in $1"
}

expect() { # where, JSON, limit, usable
  [ "$(value cgroup_cpu_limit "$2")" = "$3" ] || fail "$1: cgroup_cpu_limit $(value cgroup_cpu_limit "$2"), expected $3"
  [ "$(value usable_cpus "$2")" = "$4" ] || fail "$1: usable_cpus $(value usable_cpus "$2"), expected $4"
  [ "$(value threads "$2")" = "$4" ] || fail "$1: threads $(value threads "$2"), expected $4"
}

expect "a 1-CPU cgroup" "$(info_in "$dir")" 1 1
expect "an unlimited cgroup under it" "$(info_in "$dir/inner")" 1 1
set_quota "$dir" 2.5 2>/dev/null || skip "cannot set a 2.5-CPU quota on $dir"
out=$(info_in "$dir")
affinity=$(value affinity_cpus "$out")
expect "a 2.5-CPU cgroup" "$out" 2.5 "$((affinity < 3 ? affinity : 3))"
echo "cgroup_limit_test: passed in $dir ($affinity CPUs in the affinity mask)"
