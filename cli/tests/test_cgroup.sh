# Sourced by the tests that run moegrad in a cgroup they make
# (cgroup_limit_test.sh, cgroup_memory_test.sh): skip and fail, which end
# the test (77 is ctest's skip), and make_test_cgroup.
name=${0##*/}
name=${name%.sh}

skip() {
  echo "$name: skipped: $1"
  exit 77
}
fail() {
  echo "$name: FAILED: $1" >&2
  exit 1
}

# make_test_cgroup CONTROLLER: sets dir to a new cgroup with CONTROLLER
# ("cpu", "memory"), and makes $dir/inner below it; both are removed when
# the test exits. v1 is set to the mount point of the v1 hierarchy with
# CONTROLLER, or left empty on cgroup v2. Needs root and a writable
# controller: v1, or v2 with the process in the root cgroup and CONTROLLER
# in the root's cgroup.subtree_control. Skips the test where it cannot make
# one.
make_test_cgroup() {
  [ "$(id -u)" = 0 ] || skip "not root"
  v1=$(awk -v c="$1" '/ - cgroup / { if ($NF ~ ("(^|,)" c "(,|$)")) { print $5; exit } }' /proc/self/mountinfo)
  v2=$(awk '/ - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
  if [ -n "$v1" ]; then
    # A child of this process's own cgroup (creating one elsewhere may need
    # rights this one's owner lacks), found below the mount point by its
    # path less the cgroup the mount shows there (a container's own: "/docker/ID").
    own=$(awk -F: -v c="$1" '$2 ~ ("(^|,)" c "(,|$)") { print $3; exit }' /proc/self/cgroup)
    shown=$(awk -v c="$1" '/ - cgroup / { if ($NF ~ ("(^|,)" c "(,|$)")) { print $4; exit } }' /proc/self/mountinfo)
    own=${own#"${shown%/}"}
    dir=$v1${own%/}/moegrad_${name}_$$
  elif [ -n "$v2" ] && [ "$(cat /proc/self/cgroup)" = "0::/" ] && grep -qw "$1" "$v2/cgroup.subtree_control" 2>/dev/null; then
    dir=$v2/moegrad_${name}_$$
  else
    skip "no cgroup with the $1 controller this test can make one under"
  fi
  mkdir "$dir" 2>/dev/null || skip "cannot create $dir"
  trap 'rmdir "$dir/inner" "$dir" 2>/dev/null || true' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM # dash runs the EXIT trap on exit, not on a signal
  mkdir "$dir/inner" 2>/dev/null || skip "cannot create $dir/inner"
}

# The number after "key": in the JSON text $2 (one key a line).
value() { printf '%s\n' "$2" | sed -n "s/^  \"$1\": \\([^,]*\\),\$/\\1/p"; }
