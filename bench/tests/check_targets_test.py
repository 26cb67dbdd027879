#!/usr/bin/python3
"""bench/check_targets.py on made-up runs: every figure below is chosen by
hand, and each expected ratio and verdict is worked out in its comment from
issue 3's targets, not taken from the script."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "check_targets.py")
LINE = re.compile(r"^(PASS|MISS|n/a) +(\S+) +(.*?): (?:(\d+\.\d+)x \((?:>=|<=) [\d.]+x\)|(.*))$")


def row(shape, dtype, mode, threads, path, ms=None, gflops=None, workspace=None, batch=2048, top_k=4):
    return {"shape": shape, "batch": batch, "top_k": top_k, "experts": 60, "k": 7168, "n": 2048, "dtype": dtype,
            "mode": mode, "threads": threads, "path": path, "ms": ms, "ms_min": ms, "ms_max": ms, "gflops": gflops,
            "workspace_bytes": workspace, "peak_rss_bytes": None}


def peak(threads, gflops):
    r = row(None, None, None, threads, "fma-peak", gflops=gflops, batch=None, top_k=None)
    r.update(experts=None, k=None, n=None)
    return r


# zmoe: L = 2048 * 4 = 8192, so the workspace cap is 8 * 8192 + 4 MiB = 4259840 bytes.
CAP = 8 * 8192 + (4 << 20)
MIXED = [
    peak(1, 100.0),
    peak(2, 200.0),
    row("zmoe", "f32", "exact", 1, "fused", ms=100.0, gflops=91.0, workspace=CAP),  # workspace exactly at the cap
    row("zmoe", "f32", "exact", 1, "onednn-nonfused", ms=104.0, gflops=87.5, workspace=1),
    row("zmoe", "f32", "exact", 2, "fused", ms=52.0, gflops=179.0, workspace=CAP + 1),
    row("zmoe", "f32", "exact", 2, "onednn-nonfused", ms=60.0, gflops=150.0, workspace=1),
    row("zmoe", "bf16", "exact", 1, "fused", ms=105.0, gflops=87.0, workspace=1000),
    row("zmoe", "bf16", "exact", 2, "fused", ms=60.0, gflops=150.0, workspace=1000),
    row("zmoe", "bf16", "fast-bf16", 1, "fused", ms=50.0, gflops=180.0, workspace=1000),
    row("zmoe", "bf16", "fast-bf16", 2, "fused", ms=30.0, gflops=300.0, workspace=1000),
    row("zmoe", "bf16", "exact", 1, "onednn-nonfused", ms=50.0, gflops=180.0, workspace=1),
    row("zmoe", "bf16", "exact", 2, "onednn-nonfused", ms=29.0, gflops=310.0, workspace=1),
    row("zmoe", "f16", "exact", 1, "onednn-nonfused"),  # oneDNN could not run f16: a null row
    # A shape of the user's: no peak target; no oneDNN time; no 1-thread row.
    row("64,2,4,64,32", "f32", "exact", 2, "fused", ms=1.0, gflops=10.0, workspace=100, batch=64, top_k=2),
    row("64,2,4,64,32", "f32", "exact", 2, "onednn-nonfused", batch=64, top_k=2),
    row("64,2,4,64,32", "f32", "exact", 2, "nonfused", ms=2.0, gflops=5.0, workspace=200, batch=64, top_k=2),
]


def run(payload):
    text = payload if isinstance(payload, str) else json.dumps(payload)
    p = subprocess.run([sys.executable, SCRIPT, "-"], input=text, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def verdicts(stdout):
    """{(target, what): (verdict, value or None)} from every check line."""
    out = {}
    for line in stdout.splitlines()[:-1]:
        m = LINE.match(line)
        assert m, f"unexpected line: {line!r}"
        key = (m.group(2), m.group(3))
        assert key not in out, f"checked twice: {line!r}"
        out[key] = (m.group(1), float(m.group(4)) if m.group(4) else None)
    return out


class CheckTargets(unittest.TestCase):
    def test_each_target_met_or_missed_as_worked_out(self):
        status, stdout, stderr = run(MIXED)
        self.assertEqual(stderr, "")
        got = verdicts(stdout)
        expected = {
            # 91 / 100 = 0.910 >= 0.90; 179 / 200 = 0.895 < 0.90
            ("peak", "zmoe f32 t=1 fused/fma-peak"): ("PASS", 0.910),
            ("peak", "zmoe f32 t=2 fused/fma-peak"): ("MISS", 0.895),
            # 100 / 104 = 0.962 > 0.95; 52 / 60 = 0.867
            ("vs-onednn", "zmoe f32 t=1 fused/oneDNN time"): ("MISS", 0.962),
            ("vs-onednn", "zmoe f32 t=2 fused/oneDNN time"): ("PASS", 0.867),
            ("vs-onednn", "64,2,4,64,32 f32 t=2"): ("n/a", None),
            # 87 / 91 = 0.956; 150 / 179 = 0.838
            ("half-rate", "zmoe bf16 t=1 GFLOP/s / f32's"): ("PASS", 0.956),
            ("half-rate", "zmoe bf16 t=2 GFLOP/s / f32's"): ("MISS", 0.838),
            # 50 / 50 = 1.000, at the bound; 30 / 29 = 1.034
            ("fast-bf16", "zmoe bf16 fast-bf16 t=1 fused/oneDNN bf16 time"): ("PASS", 1.000),
            ("fast-bf16", "zmoe bf16 fast-bf16 t=2 fused/oneDNN bf16 time"): ("MISS", 1.034),
            # 100 / 52 = 1.923
            ("threads", "zmoe f32 fused 1-thread/2-thread time"): ("PASS", 1.923),
            ("threads", "64,2,4,64,32 f32 t=2"): ("n/a", None),
            # CAP / CAP = 1.000; (CAP + 1) / CAP = 1.0000002, over the cap
            ("workspace", "zmoe f32 t=1 workspace/(8*L + 4 MiB)"): ("PASS", 1.000),
            ("workspace", "zmoe f32 t=2 workspace/(8*L + 4 MiB)"): ("MISS", 1.000),
            # 1000 / CAP = 0.000235; the user's shape: 100 / (8 * 128 + 4 MiB) = 0.0000238
            ("workspace", "zmoe bf16 t=1 workspace/(8*L + 4 MiB)"): ("PASS", 0.000),
            ("workspace", "zmoe bf16 t=2 workspace/(8*L + 4 MiB)"): ("PASS", 0.000),
            ("workspace", "zmoe bf16 fast-bf16 t=1 workspace/(8*L + 4 MiB)"): ("PASS", 0.000),
            ("workspace", "zmoe bf16 fast-bf16 t=2 workspace/(8*L + 4 MiB)"): ("PASS", 0.000),
            ("workspace", "64,2,4,64,32 f32 t=2 workspace/(8*L + 4 MiB)"): ("PASS", 0.000),
        }
        # The rows this run lacks, each n/a for every target it carries:
        # zmoe f16 at 1 and 2 threads (half-rate, workspace: 4); large-token's
        # eight rows (f32: peak, vs-onednn, workspace, and threads at t=2: 7;
        # f16, bf16, fast bf16: 2 each: 12); fine-grained's eight (7 + 4 + 4,
        # and its fast bf16 rows carry only the workspace: 2).
        missing = {
            ("half-rate", "zmoe f16 t=1"), ("workspace", "zmoe f16 t=2"),
            ("peak", "large-token f32 t=1"), ("threads", "large-token f32 t=2"),
            ("fast-bf16", "large-token bf16 fast-bf16 t=2"), ("workspace", "fine-grained bf16 fast-bf16 t=1")}
        for key in missing:
            self.assertEqual(got.get(key), ("n/a", None), key)
        self.assertNotIn(("fast-bf16", "fine-grained bf16 fast-bf16 t=1"), got)
        self.assertEqual(sum(v[0] == "n/a" for v in got.values()), 2 + 4 + 19 + 17)
        checked = {k: v for k, v in got.items() if v[0] != "n/a" or k[1].startswith("64,")}
        self.assertEqual(set(checked), set(expected))
        for key, (verdict, value) in expected.items():
            self.assertEqual(got[key][0], verdict, key)
            if value is not None:
                self.assertAlmostEqual(got[key][1], value, places=3, msg=key)
        # 11 PASS and 5 MISS lines above; the n/a lines are counted apart.
        self.assertEqual(stdout.splitlines()[-1], "11 of 16 checks met, 5 missed, 42 not checked")
        self.assertEqual(status, 1)
        # Grouped by target, in the order of the module's docstring.
        order = [LINE.match(line).group(2) for line in stdout.splitlines()[:-1]]
        ranks = ["peak", "vs-onednn", "half-rate", "fast-bf16", "threads", "workspace"]
        self.assertEqual(order, sorted(order, key=ranks.index))

    def test_every_target_of_a_whole_run_met_exits_zero(self):
        # Each shape: f32 95 and 190 GFLOP/s against loops of 100 and 200
        # (0.95); 10 and 5.2 ms (1.923x) against oneDNN's 11 and 6 (0.909,
        # 0.867); f16 and bf16 at f32's rate (1.0); fast bf16 as fast as
        # oneDNN's bf16 (1.0, at the bound); 1-byte workspaces.
        rows = [peak(1, 100.0), peak(2, 200.0)]
        for shape in ("zmoe", "large-token", "fine-grained"):
            for t, ms, gflops, onednn_ms in ((1, 10.0, 95.0, 11.0), (2, 5.2, 190.0, 6.0)):
                for dtype, mode in (("f32", "exact"), ("f16", "exact"), ("bf16", "exact"), ("bf16", "fast-bf16")):
                    rows.append(row(shape, dtype, mode, t, "fused", ms=ms, gflops=gflops, workspace=1))
                rows.append(row(shape, "f32", "exact", t, "onednn-nonfused", ms=onednn_ms, gflops=1.0, workspace=1))
                rows.append(row(shape, "bf16", "exact", t, "onednn-nonfused", ms=ms, gflops=1.0, workspace=1))
        status, stdout, _ = run(rows)
        got = verdicts(stdout)
        # peak, vs-onednn: 3 shapes x 2 threads; threads: 3; half-rate: 3 x 2
        # dtypes x 2; fast-bf16: 2 shapes x 2; workspace: 3 x 4 rows x 2.
        self.assertEqual(len(got), 6 + 6 + 3 + 12 + 4 + 24)
        self.assertTrue(all(v[0] == "PASS" for v in got.values()), stdout)
        self.assertEqual(stdout.splitlines()[-1], "55 of 55 checks met")
        self.assertEqual(status, 0)

    def test_a_run_of_some_targets_met_exits_three(self):
        rows = [peak(1, 100.0),
                row("large-token", "f32", "exact", 1, "fused", ms=10.0, gflops=81.0, workspace=1),
                row("large-token", "f32", "exact", 1, "onednn-nonfused", ms=20.0, gflops=40.0, workspace=1)]
        status, stdout, _ = run(rows)
        got = verdicts(stdout)
        # 81 / 100 = 0.81 >= 0.80 (large-token's bound); 10 / 20 = 0.5; workspace 1 byte
        self.assertEqual({k: v for k, v in got.items() if v[0] != "n/a"}, {
            ("peak", "large-token f32 t=1 fused/fma-peak"): ("PASS", 0.810),
            ("vs-onednn", "large-token f32 t=1 fused/oneDNN time"): ("PASS", 0.500),
            ("workspace", "large-token f32 t=1 workspace/(8*L + 4 MiB)"): ("PASS", 0.000)})
        # The other 52 of the 55 are not in the run.
        self.assertEqual(stdout.splitlines()[-1], "3 of 3 checks met, 52 not checked")
        self.assertEqual(status, 3)

    def test_a_ratio_that_rounds_to_its_bound_shows_the_digits_that_decide(self):
        rows = [row("zmoe", "f32", "exact", 1, "fused", ms=92.48, gflops=1.0, workspace=1),
                row("zmoe", "f32", "exact", 1, "onednn-nonfused", ms=100.0, gflops=1.0, workspace=1),
                row("zmoe", "f32", "exact", 2, "fused", ms=50.0, gflops=1.0, workspace=1),
                row("zmoe", "f32", "exact", 2, "onednn-nonfused", ms=52.63, gflops=1.0, workspace=1)]
        _, stdout, _ = run(rows)
        lines = stdout.splitlines()
        # 92.48 / 50 = 1.8496 < 1.85, which three decimals would print as
        # 1.850; 50 / 52.63 = 0.950029... > 0.95 (0.950 to three decimals,
        # 0.9500 to four); 92.48 / 100 = 0.9248 shows three decimals.
        self.assertIn("MISS  threads    zmoe f32 fused 1-thread/2-thread time: 1.8496x (>= 1.85x)", lines)
        self.assertIn("MISS  vs-onednn  zmoe f32 t=2 fused/oneDNN time: 0.95003x (<= 0.95x)", lines)
        self.assertIn("PASS  vs-onednn  zmoe f32 t=1 fused/oneDNN time: 0.925x (<= 0.95x)", lines)

    def test_bounds_of_each_shape(self):
        rows = [peak(1, 100.0), peak(3, 300.0),
                row("fine-grained", "f32", "exact", 1, "fused", ms=10.0, gflops=74.9),
                row("fine-grained", "f32", "exact", 2, "fused", ms=5.5, gflops=136.2),
                row("fine-grained", "f32", "exact", 3, "fused", ms=4.0, gflops=231.0),
                row("fine-grained", "f16", "exact", 1, "fused", ms=10.7, gflops=70.25),
                row("fine-grained", "bf16", "fast-bf16", 1, "fused", ms=10.0, gflops=75.0),
                row("fine-grained", "bf16", "exact", 1, "onednn-nonfused", ms=5.0, gflops=150.0),
                row("large-token", "f32", "exact", 1, "fused", ms=18.5, gflops=78.0),
                row("large-token", "f32", "exact", 2, "fused", ms=10.0, gflops=144.3)]
        status, stdout, _ = run(rows)
        got = verdicts(stdout)
        # These rows carry no workspace bytes: 7 n/a. The rows the run
        # lacks are n/a for each target they carry: zmoe's eight (3 + 4 + 4 +
        # 4 + 4 = 19), large-token's f16, bf16 and fast bf16 (2 each: 12),
        # fine-grained's f16 at t=2 (2), bf16 (4) and fast bf16 at t=2 (1).
        for key in (("workspace", "fine-grained f32 t=3"), ("peak", "zmoe f32 t=2"),
                    ("half-rate", "fine-grained bf16 t=1"), ("workspace", "fine-grained bf16 fast-bf16 t=2")):
            self.assertEqual(got.get(key), ("n/a", None), key)
        self.assertEqual(sum(v[0] == "n/a" for v in got.values()), 7 + 7 + 19 + 12 + 7)
        present = ("fine-grained f32 t=1", "fine-grained f32 t=2", "fine-grained f32 t=3", "fine-grained f16 t=1",
                   "fine-grained bf16 fast-bf16 t=1", "large-token f32 t=1", "large-token f32 t=2",
                   "fine-grained f32 fused", "large-token f32 fused")  # the last two: the speed-up lines
        got = {k: v for k, v in got.items() if k[0] != "workspace" and k[1].startswith(present)}
        self.assertEqual(got, {
            # 74.9 / 100 = 0.749 < 0.75; no 2-thread fma-peak row; 231 / 300 = 0.770 >= 0.75
            ("peak", "fine-grained f32 t=1 fused/fma-peak"): ("MISS", 0.749),
            ("peak", "fine-grained f32 t=2"): ("n/a", None),
            ("peak", "fine-grained f32 t=3 fused/fma-peak"): ("PASS", 0.770),
            # 78 / 100 = 0.780 < 0.80 (large-token's bound)
            ("peak", "large-token f32 t=1 fused/fma-peak"): ("MISS", 0.780),
            ("peak", "large-token f32 t=2"): ("n/a", None),
            # no oneDNN rows at all
            ("vs-onednn", "fine-grained f32 t=1"): ("n/a", None),
            ("vs-onednn", "fine-grained f32 t=2"): ("n/a", None),
            ("vs-onednn", "fine-grained f32 t=3"): ("n/a", None),
            ("vs-onednn", "large-token f32 t=1"): ("n/a", None),
            ("vs-onednn", "large-token f32 t=2"): ("n/a", None),
            # 70.25 / 74.9 = 0.938 < 0.95
            ("half-rate", "fine-grained f16 t=1 GFLOP/s / f32's"): ("MISS", 0.938),
            # the fast bf16 target is for zmoe and large-token only: nothing for fine-grained
            # 10 / 5.5 = 1.818 < 1.85; 18.5 / 10 = 1.850, at the bound
            ("threads", "fine-grained f32 fused 1-thread/2-thread time"): ("MISS", 1.818),
            ("threads", "large-token f32 fused 1-thread/2-thread time"): ("PASS", 1.850)})
        self.assertEqual(stdout.splitlines()[-1], "2 of 6 checks met, 4 missed, 52 not checked")
        self.assertEqual(status, 1)

    def test_input_that_is_not_one_run_is_refused(self):
        duplicate = [peak(1, 1.0), row("zmoe", "f32", "exact", 1, "fused", ms=1.0, gflops=1.0),
                     row("zmoe", "f32", "exact", 1, "fused", ms=2.0, gflops=1.0)]
        no_path = [{"shape": "zmoe", "threads": 1}]
        cases = {
            "not JSON": ("moegrad bench: fused grad-x", "not JSON"),
            "an object": ({"path": "fused"}, "not a JSON array of objects"),
            "no rows": ([], "no measured path"),
            "only the peak": ([peak(1, 1.0)], "no measured path"),
            "two runs": (duplicate, "two rows for zmoe f32 exact 1 fused"),
            "a field missing": (no_path, "a row has no 'path' field"),
            "no gflops field": ([{k: v for k, v in row("zmoe", "f32", "exact", 1, "fused", ms=1.0).items()
                                  if k != "gflops"}], "a row has no 'gflops' field"),
            "a time without gflops": ([row("zmoe", "f32", "exact", 1, "fused", ms=1.0)],
                                      "zmoe f32 exact 1 fused: ms and gflops must both be numbers or both null"),
            "a zero time": ([row("zmoe", "f32", "exact", 1, "fused", ms=0, gflops=1.0)],
                            "zmoe f32 exact 1 fused: ms is 0, not null or a positive number"),
            "a text workspace": ([row("zmoe", "f32", "exact", 1, "fused", ms=1.0, gflops=1.0, workspace="1")],
                                 'zmoe f32 exact 1 fused: workspace_bytes is "1", not null or a non-negative number'),
            "a negative peak": ([peak(1, -1.0), row("zmoe", "f32", "exact", 1, "fused", ms=1.0, gflops=1.0)],
                                "the 1-thread fma-peak row: gflops is -1.0, not null or a positive number"),
            "an infinite time": ('[{"shape": "zmoe", "batch": 2048, "top_k": 4, "dtype": "f32", "mode": "exact", '
                                 '"threads": 1, "path": "fused", "ms": Infinity, "ms_min": 1, "ms_max": 1, '
                                 '"gflops": 1, "workspace_bytes": 1}]',
                                 "zmoe f32 exact 1 fused: ms is Infinity, not null or a positive number"),
            "a list for a shape": ([dict(row("zmoe", "f32", "exact", 1, "fused"), shape=["zmoe"])],
                                   "a row's shape is [\"zmoe\"], not a string"),
            "text threads": ([peak("1", 1.0)], "a row's threads is \"1\", not an integer"),
            "two peaks": ([peak(1, 100.0), peak(1, 50.0), row("zmoe", "f32", "exact", 1, "fused", ms=1.0, gflops=1.0)],
                          "two fma-peak rows for 1 thread(s)"),
            "a median outside its range": ([dict(row("zmoe", "f32", "exact", 1, "fused", ms=2.0, gflops=1.0),
                                                 ms_min=2.5)],
                                           "zmoe f32 exact 1 fused: ms 2.0 is not within ms_min 2.5 and ms_max 2.0"),
            "no tokens": ([row("zmoe", "f32", "exact", 1, "fused", ms=1.0, gflops=1.0, workspace=1, batch=0)],
                          "zmoe f32 exact 1 fused: batch is 0, not null or a positive number"),
            "a layer operator's run": ([peak(1, 1.0), dict(row("zmoe", "f32", "exact", 1, "moegrad", ms=1.0,
                                                               gflops=1.0), op="forward")],
                                       "a row of --op \"forward\": issue 3's targets are grad-x's"),
        }
        for name, (payload, message) in cases.items():
            with self.subTest(name):
                status, stdout, stderr = run(payload)
                self.assertEqual(status, 2)
                self.assertEqual(stdout, "")
                self.assertRegex(stderr, r"^check_targets: error: -: .*" + re.escape(message))

    def test_a_row_without_top_k_has_no_workspace_check(self):
        # L = batch * top_k is unknown: the workspace check is n/a, not a crash.
        status, stdout, _ = run([row("zmoe", "f32", "exact", 1, "fused", ms=1.0, gflops=1.0, workspace=1, top_k=None)])
        self.assertEqual(verdicts(stdout)[("workspace", "zmoe f32 t=1")],
                         ("n/a", None))
        self.assertEqual(status, 3)

    def test_a_row_without_a_time_still_has_its_workspace_checked(self):
        # A path whose grad_x failed the bench's check has null times but its
        # workspace: 10^12 bytes against zmoe's cap of 4259840 is a miss, and
        # the row's speed targets cannot be shown.
        status, stdout, _ = run([row("zmoe", "f32", "exact", 1, "fused", workspace=10**12)])
        got = verdicts(stdout)
        self.assertEqual(got[("workspace", "zmoe f32 t=1 workspace/(8*L + 4 MiB)")][0], "MISS")
        self.assertEqual(got[("peak", "zmoe f32 t=1")], ("n/a", None))
        self.assertEqual(got[("vs-onednn", "zmoe f32 t=1")], ("n/a", None))
        self.assertEqual(status, 1)

    def test_unreadable_file(self):
        p = subprocess.run([sys.executable, SCRIPT, "/nonexistent/run.json"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("check_targets: error: /nonexistent/run.json:", p.stderr)


    def test_a_file_that_is_not_text_is_refused(self):
        # Bytes that are not UTF-8 (a .npy given by mistake, or a run whose
        # text was mangled): exit 2 and the error line, as for any input that
        # is not one run, not a traceback nor a run read with a garbled shape.
        run_rows = [peak(1, 1.0), row("zmoe", "f32", "exact", 1, "fused", ms=1.0, gflops=1.0)]
        mangled = json.dumps(run_rows).encode().replace(b'"zmoe"', b'"zmo\xff"')
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "run.npy")
            with open(path, "wb") as f:
                f.write(b"\x93NUMPY\x01\x00\xff\xfe")
            for args, stdin in (([path], None), (["-"], mangled)):
                with self.subTest(args[0]):
                    p = subprocess.run([sys.executable, SCRIPT] + args, input=stdin, capture_output=True, timeout=60)
                    self.assertEqual(p.returncode, 2)
                    self.assertEqual(p.stdout, b"")
                    self.assertRegex(p.stderr.decode(), r"^check_targets: error: (-|.*run\.npy): .*\n$")


if __name__ == "__main__":
    unittest.main()
