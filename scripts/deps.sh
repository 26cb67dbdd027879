#!/usr/bin/env bash
# Sourced by run.sh and the test scripts: installs Debian packages
# idempotently (`apt-get update` runs only when something is missing, and
# only once), and says how many tests to run at once.

moegrad_need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then echo sudo; else
      echo "moegrad: packages are missing and this is not root: install $* yourself" >&2
      return 1
    fi
  fi
}

# ensure_packages PKG...: install those not yet installed.
ensure_packages() {
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo
  sudo=$(moegrad_need_root "${missing[@]}") || return 1
  echo "moegrad: installing ${missing[*]}" >&2
  if [ -z "${MOEGRAD_APT_UPDATED:-}" ]; then
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || return 1
    export MOEGRAD_APT_UPDATED=1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null || return 1
}

# test_jobs MOEGRAD: how many tests to run at once: the CPUs moegrad may use
# here (its affinity mask narrowed by a cgroup CPU quota: `MOEGRAD info`'s
# usable_cpus), or nproc where that binary cannot say. More jobs than a quota
# allows are only throttled, and a throttled test can miss what it times.
test_jobs() {
  local n
  n=$("$1" info --json 2>/dev/null | sed -n 's/^  "usable_cpus": \([0-9][0-9]*\),$/\1/p') || true
  echo "${n:-$(nproc)}"
}

# What the library and the CLI need to build.
MOEGRAD_BUILD_PACKAGES=(g++ cmake make libdlpack-dev)
# What the tests need on top: GoogleTest; Google Benchmark (kernel_bench);
# oneDNN (the bench baseline, built into `moegrad bench`); pybind11, numpy,
# PyTorch and pytest for the Python package (Debian's /usr/bin/python3);
# pkg-config, pip, setuptools and wheel for the install tests (the
# installed packages' consumers, `pip install .`).
MOEGRAD_TEST_PACKAGES=(googletest libgtest-dev libgmock-dev libbenchmark-dev libdnnl-dev
                       python3-dev pybind11-dev python3-numpy python3-torch python3-pytest pkgconf
                       python3-pip python3-setuptools python3-wheel)
