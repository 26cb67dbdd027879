#!/bin/sh
# A real cgroup memory limit is the memory `run` sizes its buffers by. In a
# new cgroup limited to 512 MiB, and in an unlimited cgroup below it (the
# kernel enforces the parent's limit there too), `moegrad info --json`
# must report at most 512 MiB of headroom as the memory available, a small
# run must pass, and a run needing about 0.77 GiB must be refused, before
# allocating, naming the cgroup's limit (MemAvailable, the whole
# machine's, would have let it be OOM-killed). Needs root and a writable
# memory controller: cgroup v1, or v2 with the process in the root cgroup
# and `memory` in the root's cgroup.subtree_control. Exits 77 (skipped)
# where it cannot make one, or where 1 GiB is not available outside it.
#
# usage: cgroup_memory_test.sh path/to/moegrad
set -eu
moegrad=$1
limit=536870912 # 512 MiB

. "$(dirname "$0")/test_cgroup.sh"

# The new cgroup's limit must be the tightest figure: more than twice it
# available outside (MemAvailable, and any limit on this process's cgroups).
available=$(value memory_available_bytes "$("$moegrad" info --json)")
[ "$available" != null ] && [ "$available" -gt $((2 * limit)) ] ||
  skip "only $available bytes available here: the test's $limit-byte limit would not be the tightest"
make_test_cgroup memory
limit_file=memory.max
[ -z "$v1" ] || limit_file=memory.limit_in_bytes
echo "$limit" >"$dir/$limit_file" 2>/dev/null || skip "cannot set a memory limit on $dir"

# moegrad with arguments $2..., run by a shell that first moves itself into
# cgroup $1; its standard error joins its output, its status is echoed last.
moegrad_in() {
  where=$1
  shift
  sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@" 2>&1; ' sh "$where" "$moegrad" "$@" && echo "status 0" ||
    echo "status $?"
}

for where in "$dir" "$dir/inner"; do
  out=$(moegrad_in "$where" info --json)
  case $out in *"status 0") ;; *) fail "moegrad info in $where: $out" ;; esac
  headroom=$(value cgroup_memory_headroom_bytes "$out")
  available=$(value memory_available_bytes "$out")
  # What the shell and moegrad already use comes off the limit: a few MiB.
  [ "$headroom" != null ] && [ "$headroom" -le "$limit" ] && [ "$headroom" -gt $((limit / 2)) ] ||
    fail "$where: cgroup_memory_headroom_bytes $headroom, expected at most $limit (and more than half)"
  [ "$available" -le "$limit" ] || fail "$where: memory_available_bytes $available exceeds the $limit limit"

  # grad_y 1000 x 100000 x 4 bytes, weight 1000 x 100000 x 4, two grad_x:
  # 0.77 GiB, refused; a small shape is not.
  out=$(moegrad_in "$where" run --batch 1000 --top-k 1 --experts 1 --k 1000 --n 100000 --threads 1)
  case $out in
    *"more than the "*" GiB available (the memory cgroup's limit less its use): choose a smaller shape"*"status 1") ;;
    *) fail "a run needing 0.77 GiB in $where was not refused by the cgroup's limit: $out" ;;
  esac
  out=$(moegrad_in "$where" run --batch 64 --top-k 2 --experts 4 --k 64 --n 32 --threads 1)
  case $out in *"status 0") ;; *) fail "a small run in $where failed: $out" ;; esac
done
echo "cgroup_memory_test: passed in $dir"
