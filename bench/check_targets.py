#!/usr/bin/python3
"""Reads the JSON array of one `moegrad bench --json` run and checks issue 3's
performance targets against it, each a ratio within that run:

  peak       f32 fused GFLOP/s / the FMA loop's at that thread count:
             >= 0.90 on zmoe, 0.80 on large-token, 0.75 on fine-grained
  vs-onednn  f32 fused time / oneDNN's non-fused time: <= 0.95, every shape
  half-rate  f16 and bf16 (exact) fused GFLOP/s / f32's: >= 0.95
  fast-bf16  fast bf16 fused time / oneDNN's bf16 non-fused time: <= 1.0 on
             zmoe and large-token
  threads    f32 fused 1-thread time / 2-thread time: >= 1.85, every shape
  workspace  fused workspace bytes <= 8*L + 4 MiB, L = batch*top_k

Prints one line per check (PASS, MISS, or n/a where the run has no row to
compare with, such as oneDNN's f16 path), then how many were met. Exit
status: 0 when every check passes, 1 when one misses, 2 when the input is
not such a run. Standard library only.

  build/bin/moegrad bench --json > run.json && bench/check_targets.py run.json
"""

import argparse
import json
import sys

PEAK = {"zmoe": 0.90, "large-token": 0.80, "fine-grained": 0.75}
VS_ONEDNN = 0.95
HALF_RATE = 0.95
FAST_BF16 = 1.0
FAST_BF16_SHAPES = ("zmoe", "large-token")
THREADS = 1.85
WORKSPACE_SLACK = 4 << 20


class BadRun(Exception):
    pass


def load_rows(text):
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadRun(f"not JSON: {e}") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise BadRun("not a JSON array of objects (the output of `moegrad bench --json`)")
    peaks, paths = {}, {}
    for r in rows:
        try:
            if r["path"] == "fma-peak":
                peaks[r["threads"]] = r["gflops"]
                continue
            key = (r["shape"], r["dtype"], r["mode"], r["threads"], r["path"])
        except KeyError as e:
            raise BadRun(f"a row has no {e} field") from None
        if key in paths:
            raise BadRun("two rows for " + " ".join(map(str, key)) + ": give one run's output")
        paths[key] = r
    if not paths:
        raise BadRun("no measured path in the input")
    return peaks, paths


ORDER = ("peak", "vs-onednn", "half-rate", "fast-bf16", "threads", "workspace")


class Checks:
    """The verdicts, printed grouped by target, rows in the run's order."""

    def __init__(self):
        self.entries = []  # (target's rank, line), in the run's order
        self.met = self.missed = 0

    def ratio(self, name, what, value, bound, at_least):
        ok = value >= bound if at_least else value <= bound
        self.met += ok
        self.missed += not ok
        rel = ">=" if at_least else "<="
        self.add(name, f"{'PASS' if ok else 'MISS'}  {name:<10} {what}: {value:.3f}x ({rel} {bound:g}x)")

    def na(self, name, what, why):
        self.add(name, f"n/a   {name:<10} {what}: {why}")

    def add(self, name, line):
        self.entries.append((ORDER.index(name), line))

    def lines(self):
        # A stable sort by target keeps each target's lines in the run's order.
        return [line for _, line in sorted(self.entries, key=lambda e: e[0])]


def measured(row):
    return row is not None and row.get("ms") is not None


def check(peaks, paths):
    c = Checks()
    fused = [k for k in paths if k[4] == "fused"]  # in the run's order
    for shape, dtype, mode, threads, _ in fused:
        row = paths[(shape, dtype, mode, threads, "fused")]
        what = f"{shape} {dtype}{'' if mode == 'exact' else ' ' + mode} t={threads}"
        if not measured(row):
            continue
        if dtype == "f32" and mode == "exact":
            if shape in PEAK:
                if peaks.get(threads):
                    c.ratio("peak", what + " fused/fma-peak", row["gflops"] / peaks[threads], PEAK[shape], True)
                else:
                    c.na("peak", what, "no fma-peak row for this thread count")
            onednn = paths.get((shape, dtype, mode, threads, "onednn-nonfused"))
            if measured(onednn):
                c.ratio("vs-onednn", what + " fused/oneDNN time", row["ms"] / onednn["ms"], VS_ONEDNN, False)
            else:
                c.na("vs-onednn", what, "no oneDNN time")
            if threads == 2:
                one = paths.get((shape, dtype, mode, 1, "fused"))
                if measured(one):
                    c.ratio("threads", f"{shape} f32 fused 1-thread/2-thread time", one["ms"] / row["ms"], THREADS,
                            True)
                else:
                    c.na("threads", what, "no 1-thread fused time")
        elif mode == "exact":
            f32 = paths.get((shape, "f32", "exact", threads, "fused"))
            if measured(f32):
                c.ratio("half-rate", what + " GFLOP/s / f32's", row["gflops"] / f32["gflops"], HALF_RATE, True)
            else:
                c.na("half-rate", what, "no f32 fused time")
        elif dtype == "bf16" and mode == "fast-bf16" and shape in FAST_BF16_SHAPES:
            onednn = paths.get((shape, "bf16", "exact", threads, "onednn-nonfused"))
            if measured(onednn):
                c.ratio("fast-bf16", what + " fused/oneDNN bf16 time", row["ms"] / onednn["ms"], FAST_BF16, False)
            else:
                c.na("fast-bf16", what, "no oneDNN bf16 time")
        if row.get("workspace_bytes") is not None and row.get("batch") is not None:
            cap = 8 * row["batch"] * row["top_k"] + WORKSPACE_SLACK
            c.ratio("workspace", what + " workspace/(8*L + 4 MiB)", row["workspace_bytes"] / cap, 1.0, False)
    return c


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="the JSON that `moegrad bench --json` printed, or - for standard input")
    args = parser.parse_args(argv)
    try:
        if args.run == "-":
            text = sys.stdin.read()
        else:
            with open(args.run, encoding="utf-8") as f:
                text = f.read()
        peaks, paths = load_rows(text)
    except (OSError, BadRun) as e:
        print(f"check_targets: error: {args.run}: {e}", file=sys.stderr)
        return 2
    c = check(peaks, paths)
    print("\n".join(c.lines()))
    print(f"{c.met} of {c.met + c.missed} checks met" + ("" if c.missed == 0 else f", {c.missed} missed"))
    return 0 if c.missed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
