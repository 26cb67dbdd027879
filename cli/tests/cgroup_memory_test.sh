#!/bin/sh
# A real cgroup memory limit is the memory `run` sizes its buffers by. In a
# new cgroup limited to 512 MiB, and in an unlimited cgroup below it (the
# kernel enforces the parent's limit there too), `moegrad info --json`
# must report at most 512 MiB of headroom as the memory available, a small
# run must pass (with 64 threads too: a bound of 16 MiB a thread once
# refused it), and a run needing about 0.77 GiB and a grad-x whose grad_x
# is 1 GiB must be refused, before allocating, naming the cgroup's limit
# (MemAvailable, the whole machine's, would have let them be OOM-killed,
# grad-x leaving its temporary output behind). Needs root and a writable
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

# grad-x's inputs, by hand: grad_y [1, 4], weight [1, 64, 4] (zeros), one
# row of expert 0. With --batch 4194304 its grad_x is [4194304, 64] f32, 1 GiB.
files=$(mktemp -d)
trap 'rm -rf "$files"; rmdir "$dir/inner" "$dir" 2>/dev/null || true' EXIT
# npy FILE DESCR SHAPE: a .npy 1.0 header of 128 bytes; the data follows.
npy() {
  printf '\223NUMPY\001\000\166\000' >"$1"
  printf "%-117s\n" "{'descr': '$2', 'fortran_order': False, 'shape': $3, }" >>"$1"
}
npy "$files/gy.npy" '<f4' '(1, 4)' && head -c 16 /dev/zero >>"$files/gy.npy"
npy "$files/w.npy" '<f4' '(1, 64, 4)' && head -c 1024 /dev/zero >>"$files/w.npy"
npy "$files/idx.npy" '<i4' '(1,)' && head -c 4 /dev/zero >>"$files/idx.npy"
npy "$files/gl.npy" '<i4' '(1,)' && printf '\001\000\000\000' >>"$files/gl.npy"

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
  for threads in 1 64; do
    out=$(moegrad_in "$where" run --batch 64 --top-k 2 --experts 4 --k 64 --n 32 --threads $threads)
    case $out in *"status 0") ;; *) fail "a small run with $threads threads in $where failed: $out" ;; esac
  done

  echo old >"$files/dx.npy"
  out=$(moegrad_in "$where" grad-x --grad-y "$files/gy.npy" --weight "$files/w.npy" --row-idx "$files/idx.npy" \
    --group-list "$files/gl.npy" --batch 4194304 --top-k 1 --threads 1 --out "$files/dx.npy")
  case $out in
    *"grad_x [4194304, 64] (--batch by the weight's K) and the workspace need "*" GiB available (the memory cgroup's limit less its use)"*"status 1") ;;
    *) fail "a grad-x needing 1 GiB in $where was not refused by the cgroup's limit: $out" ;;
  esac
  [ "$(cat "$files/dx.npy")" = old ] || fail "the refused grad-x in $where changed its --out"
  [ "$(ls -A "$files" | wc -l)" = 5 ] || fail "the refused grad-x in $where left a file behind: $(ls -A "$files")"
  out=$(moegrad_in "$where" grad-x --grad-y "$files/gy.npy" --weight "$files/w.npy" --row-idx "$files/idx.npy" \
    --group-list "$files/gl.npy" --batch 2 --top-k 1 --threads 1 --out "$files/dx.npy")
  case $out in *"status 0") ;; *) fail "a small grad-x in $where failed: $out" ;; esac
done
echo "cgroup_memory_test: passed in $dir"
