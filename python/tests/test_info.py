"""moegrad.info() and `python3 -m moegrad`: each setting reported is the one
the environment asked for; a malformed variable raises."""
import json
import os
import subprocess
import sys

import pytest

import moegrad

VARIABLES = ("MOEGRAD_NUM_THREADS", "MOEGRAD_ISA", "MOEGRAD_ENGINE", "MOEGRAD_L1D_BYTES", "MOEGRAD_L2_BYTES")


@pytest.fixture
def no_variables(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_info_reports_what_the_environment_asks_for(no_variables):
    asked = {"MOEGRAD_NUM_THREADS": "3", "MOEGRAD_ISA": "scalar", "MOEGRAD_ENGINE": "packed",
             "MOEGRAD_L1D_BYTES": "32768", "MOEGRAD_L2_BYTES": "262144"}
    for name, value in asked.items():
        no_variables.setenv(name, value)
    no_variables.setenv("MOEGRAD_NUM_THREAD", "1")  # misspelled: reported, not read
    no_variables.setenv("MOEGRAD_COLOUR", "1")
    # Misspellings as people make them: case, underscores, a word left out.
    hints = {"MOEGRAD_THREADS": "MOEGRAD_NUM_THREADS", "MOEGRAD_NTHREADS": "MOEGRAD_NUM_THREADS",
             "moegrad_num_threads": "MOEGRAD_NUM_THREADS", "MOEGRAD_L2BYTES": "MOEGRAD_L2_BYTES",
             "MOEGRAD_X": None}
    for name in hints:
        no_variables.setenv(name, "1")
    # The project's build and test scripts' variables are not misspellings.
    script_variables = ("MOEGRAD_CMAKE_BUILD_DIR", "MOEGRAD_APT_UPDATED", "MOEGRAD_SANITIZERS", "MOEGRAD_FUZZ_SEED",
                        "MOEGRAD_TEST_BENCH_MODULE")
    for name in script_variables:
        no_variables.setenv(name, "1")
    info = moegrad.info()
    for name in script_variables:
        assert name not in info["ignored_environment"], name
    assert info["ignored_environment"]["MOEGRAD_NUM_THREAD"] == "MOEGRAD_NUM_THREADS"
    assert info["ignored_environment"]["MOEGRAD_COLOUR"] is None
    for name, hint in hints.items():
        assert info["ignored_environment"][name] == hint, name
    assert info["version"] == moegrad.__version__
    assert info["isa"] == "scalar"
    assert info["threads"] == 3
    assert info["engine"] == "packed"
    assert (info["l1d_bytes"], info["l2_bytes"]) == (32768, 262144)
    assert info["environment"] == asked
    assert isinstance(info["cpu"], str) and info["cpu"]
    assert isinstance(info["avx512_bf16"], bool)
    for key in ("os_l1d_bytes", "os_l2_bytes"):
        assert info[key] is None or info[key] > 0


def test_info_lists_the_isa_paths_the_cpu_runs(no_variables):
    info = moegrad.info()
    assert info["isa_available"][0] == "scalar"
    assert info["isa_available"] == [i for i in ("scalar", "avx2", "avx512") if moegrad.isa_available(i)]
    assert info["isa"] == info["isa_available"][-1]  # auto picks the best
    assert info["engine"] == "auto"
    assert info["environment"] == {name: None for name in VARIABLES}


def test_info_says_where_the_default_thread_count_comes_from(no_variables):
    info = moegrad.info()
    assert info["affinity_cpus"] == len(os.sched_getaffinity(0))
    limit = info["cgroup_cpu_limit"]
    assert limit is None or (isinstance(limit, float) and limit > 0)
    assert 1 <= info["usable_cpus"] <= info["affinity_cpus"]
    assert info["threads"] == info["usable_cpus"] == moegrad.Context().num_threads


def test_info_of_a_given_context(no_variables):
    context = moegrad.Context(num_threads=1, isa="scalar")
    info = moegrad.info(context)
    assert (info["threads"], info["isa"]) == (1, "scalar")


def test_info_raises_on_a_malformed_variable(no_variables):
    no_variables.setenv("MOEGRAD_ISA", "bogus")
    with pytest.raises(moegrad.Error, match="MOEGRAD_ISA='bogus'") as e:
        moegrad.info()
    assert e.value.status == "MOEGRAD_STATUS_INVALID_ARGUMENT"


def test_python_m_moegrad_prints_the_same_as_json(no_variables):
    env = dict(os.environ, MOEGRAD_NUM_THREADS="2", MOEGRAD_L2_BYTES="524288")
    out = subprocess.run([sys.executable, "-m", "moegrad"], env=env, capture_output=True, text=True, check=True)
    printed = json.loads(out.stdout)
    assert printed["threads"] == 2 and printed["l2_bytes"] == 524288
    assert printed["environment"]["MOEGRAD_L2_BYTES"] == "524288"
    assert set(printed) == set(moegrad.info())

    bad = dict(os.environ, MOEGRAD_NUM_THREADS="zero")
    failed = subprocess.run([sys.executable, "-m", "moegrad"], env=bad, capture_output=True, text=True)
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.startswith("moegrad: error: MOEGRAD_NUM_THREADS='zero'")


def test_python_m_moegrad_takes_help_and_refuses_arguments():
    helped = subprocess.run([sys.executable, "-m", "moegrad", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: python3 -m moegrad")
    assert "moegrad.info()" in helped.stdout
    extra = subprocess.run([sys.executable, "-m", "moegrad", "json"], capture_output=True, text=True)
    assert extra.returncode == 2 and extra.stdout == ""
    assert "unrecognized arguments: json" in extra.stderr


def test_python_m_moegrad_into_a_closed_pipe_prints_no_traceback():
    # The reader exits before the JSON is written (`| head -c 0`).
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "moegrad"], stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert done.returncode == 1
    assert done.stderr == ""


def test_the_extension_exports_no_c_api_function():
    # Exported, moegrad_* would bind to the first definition in the process
    # (another libmoegrad, a preload), not to the module's own.
    import ctypes
    import moegrad._moegrad as extension
    lib = ctypes.CDLL(extension.__file__)
    for name in ("moegrad_version", "moegrad_grad_x", "moegrad_context_create"):
        assert not hasattr(lib, name), name
    assert hasattr(lib, "PyInit__moegrad")
