#!/usr/bin/env bash
# `pip install .` (pyproject.toml, setup.py) into a fresh virtual environment
# that sees Debian's numpy, torch and pytest (--system-site-packages), offline
# and without build isolation, as README "Install and link" shows. Then:
# the package imports from the environment, its metadata version is the C
# header's, the Python test suite passes against it, and pip uninstalls
# every file it installed.
#
# usage: pip_test.sh SOURCE_DIR PYTHON [BUILD_DIR]
# With BUILD_DIR, setup.py builds the extension there (MOEGRAD_CMAKE_BUILD_DIR:
# the library is not compiled a second time); without it, setup.py configures
# and builds the project from scratch, which is what users run.
set -euo pipefail

source=$1 python=$2 build=${3:-}
# Only the virtual environment may provide the package.
unset PYTHONPATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "pip_test: $*" >&2
  exit 1
}

"$python" -m venv --without-pip --system-site-packages "$tmp/venv"
venv_python=$tmp/venv/bin/python
if [ -n "$build" ]; then
  # A build directory configured without the extension (scripts/run.sh's)
  # is refused with what to do, not with make's "No rule to make target".
  cmake -S "$source" -B "$tmp/no_python" -DMOEGRAD_BUILD_PYTHON=OFF -DMOEGRAD_BUILD_TESTS=OFF \
    -DMOEGRAD_BUILD_BENCH=OFF >"$tmp/no_python.log" 2>&1 || {
    cat "$tmp/no_python.log" >&2
    fail "configuring a build without the Python package failed"
  }
  rm -rf "$source/build-python"
  if (cd "$tmp" && MOEGRAD_CMAKE_BUILD_DIR=$tmp/no_python "$venv_python" -m pip install --no-build-isolation \
    --no-deps --no-index "$source") >"$tmp/pip_no_python.log" 2>&1; then
    fail "pip install built the extension in a build directory configured without it"
  fi
  grep -q "was configured without the Python package (MOEGRAD_BUILD_PYTHON=OFF)" "$tmp/pip_no_python.log" || {
    cat "$tmp/pip_no_python.log" >&2
    fail "pip install in a build directory without the Python package did not say why it failed"
  }
  export MOEGRAD_CMAKE_BUILD_DIR=$build
else
  unset MOEGRAD_CMAKE_BUILD_DIR  # from scratch, even if the caller's shell sets it
  # CMAKE_ARGS reaches setup.py's configure step, after its own arguments:
  # turning the Python package off there leaves no extension to build. The
  # define in CMAKE_CXX_FLAGS only marks the cache, for the check below.
  rm -rf "$source/build-python"
  if (cd "$tmp" && CMAKE_ARGS="-DMOEGRAD_BUILD_PYTHON=OFF -DCMAKE_CXX_FLAGS=-DMOEGRAD_PIP_TEST_EARLIER_ARGS" \
    "$venv_python" -m pip install --no-build-isolation --no-deps --no-index "$source") \
    >"$tmp/pip_cmake_args.log" 2>&1; then
    fail "pip install built the extension with CMAKE_ARGS=-DMOEGRAD_BUILD_PYTHON=OFF: CMAKE_ARGS was not applied"
  fi
  grep -q -- "-DPython3_EXECUTABLE=[^ ]* -DMOEGRAD_BUILD_PYTHON=OFF" "$tmp/pip_cmake_args.log" || {
    cat "$tmp/pip_cmake_args.log" >&2
    fail "setup.py's configure step did not end with CMAKE_ARGS"
  }
fi
unset CMAKE_ARGS
# From scratch, the next install reuses that build-python/ and its CMake
# cache, which must not keep the earlier CMAKE_ARGS. In a build directory,
# setup.py's build-python/ must not carry a module from an earlier build.
[ -z "$build" ] || rm -rf "$source/build-python"
(cd "$tmp" && "$venv_python" -m pip install --no-build-isolation --no-deps --no-index "$source") \
  >"$tmp/pip.log" 2>&1 || {
  cat "$tmp/pip.log" >&2
  fail "pip install failed"
}
if [ -z "$build" ]; then
  cache=$(find "$source/build-python" -name CMakeCache.txt)
  [ -n "$cache" ] || fail "setup.py's CMake build left no CMakeCache.txt under build-python/"
  if grep -q MOEGRAD_PIP_TEST_EARLIER_ARGS $cache; then
    fail "the CMake cache of build-python/ kept an earlier install's CMAKE_ARGS: $(grep -l MOEGRAD_PIP_TEST $cache)"
  fi
fi

version=$(sed -n 's/^#define MOEGRAD_VERSION_STRING "\(.*\)"$/\1/p' "$source/include/moegrad/moegrad.h")
(cd "$tmp" && "$venv_python" - "$tmp/venv" "$version") <<'EOF'
import importlib.metadata
import sys

import moegrad

venv, version = sys.argv[1], sys.argv[2]
assert moegrad.__file__.startswith(venv), f"imported {moegrad.__file__}, not the pip-installed package"
assert moegrad.__version__ == version, f"module {moegrad.__version__}, header {version}"
assert importlib.metadata.version("moegrad") == version, f"metadata {importlib.metadata.version('moegrad')}"
EOF

(cd "$tmp" && "$venv_python" -m pytest -q -p no:cacheprovider "$source/python/tests") >"$tmp/pytest.log" 2>&1 || {
  cat "$tmp/pytest.log" >&2
  fail "the Python tests failed against the pip-installed package"
}
tail -1 "$tmp/pytest.log" | grep -Eq '^[0-9]+ passed' || fail "pytest ran no test: $(tail -1 "$tmp/pytest.log")"

"$venv_python" -m pip uninstall -y moegrad >/dev/null
if find "$tmp/venv/lib" -path '*site-packages/moegrad*' | grep -q .; then
  fail "pip uninstall left files behind"
fi
echo "pip_test: OK (moegrad $version, $(tail -1 "$tmp/pytest.log"))"
