"""Builds the moegrad Python package for `pip install .` (pyproject.toml).

The extension moegrad._moegrad is the CMake target `_moegrad`: this configures
the project in setuptools' temporary directory for the interpreter running
the build (only the library and the extension: no tests, no benchmarks),
builds that one target and puts the module into the wheel next to
python/moegrad/*.py. The version is the C header's, so the three cannot
disagree.

MOEGRAD_CMAKE_BUILD_DIR=DIR builds the target in an existing, already
configured build directory instead (no second compile of the library); it
must have been configured with the Python package (scripts/test.sh's build/,
not one that scripts/run.sh configured first) for a Python with this
interpreter's extension suffix.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def header_version():
    header = (ROOT / "include" / "moegrad" / "moegrad.h").read_text()
    match = re.search(r'#define MOEGRAD_VERSION_STRING "([^"]+)"', header)
    if match is None:
        raise RuntimeError("include/moegrad/moegrad.h defines no MOEGRAD_VERSION_STRING")
    return match.group(1)


def _cache_bool(cache, name):
    """A boolean of a CMakeCache.txt as CMake reads it (its false values:
    0, OFF, NO, FALSE, N, IGNORE, NOTFOUND, empty, *-NOTFOUND); an entry
    that is missing counts as false."""
    for line in cache.read_text(errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.split(":", 1)[0] == name:
            value = value.strip().upper()
            return not (value in ("", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND")
                        or value.endswith("-NOTFOUND"))
    return False


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        reuse = os.environ.get("MOEGRAD_CMAKE_BUILD_DIR")
        if reuse:
            build_dir = Path(reuse).resolve()
            if not (build_dir / "CMakeCache.txt").is_file():
                raise RuntimeError(f"MOEGRAD_CMAKE_BUILD_DIR={reuse} is not a configured CMake build directory")
            # scripts/run.sh configures a fresh build/ without the extension's
            # target; CMake writes a target's directory whatever the generator,
            # but never removes it, so the cache says whether it is still on.
            if (not (build_dir / "python" / "CMakeFiles" / "_moegrad.dir").is_dir()
                    or not _cache_bool(build_dir / "CMakeCache.txt", "MOEGRAD_BUILD_PYTHON")):
                raise RuntimeError(f"MOEGRAD_CMAKE_BUILD_DIR={reuse} was configured without the Python package "
                                   f"(MOEGRAD_BUILD_PYTHON=OFF): configure it with -DMOEGRAD_BUILD_PYTHON=ON "
                                   f"-DPython3_EXECUTABLE={sys.executable}, or leave MOEGRAD_CMAKE_BUILD_DIR unset")
        else:
            build_dir = Path(self.build_temp).resolve() / "cmake"
            # CMAKE_ARGS (scikit-build's and conda's convention): the caller's
            # own arguments, after these, so that theirs win. --fresh drops
            # the cache an earlier install left, so its CMAKE_ARGS do not
            # outlive it; the compiled objects stay and are reused.
            self._run(["cmake", "--fresh", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                       "-DMOEGRAD_BUILD_TESTS=OFF", "-DMOEGRAD_BUILD_BENCH=OFF", "-DMOEGRAD_BENCH_ONEDNN=OFF",
                       "-DMOEGRAD_BUILD_PYTHON=ON",
                       f"-DPython3_EXECUTABLE={sys.executable}"] + shlex.split(os.environ.get("CMAKE_ARGS", "")))
        # The CPUs this process may use (taskset, a container's cpuset), not
        # every CPU of the machine.
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self._run(["cmake", "--build", str(build_dir), "--target", "_moegrad", "-j", str(jobs)])
        built = build_dir / "python" / "moegrad" / ("_moegrad" + suffix)
        if not built.is_file():
            raise RuntimeError(f"{built} was not built: was {build_dir} configured for another Python "
                               f"(this one's extension suffix is {suffix})?")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)

    @staticmethod
    def _run(cmd):
        print("moegrad setup.py:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


# setuptools' own build and egg-info directories go to build-python/, not to
# build/ (the CMake build of scripts/run.sh and test.sh) or python/.
BUILD_BASE = ROOT / "build-python"
BUILD_BASE.mkdir(exist_ok=True)

setup(
    version=header_version(),
    options={"build": {"build_base": str(BUILD_BASE)}, "egg_info": {"egg_base": str(BUILD_BASE)}},
    packages=["moegrad"],
    package_dir={"": "python"},
    ext_modules=[Extension("moegrad._moegrad", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
