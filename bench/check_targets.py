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

The issue's checks are those of its three shapes at 1 and 2 threads, f32,
f16 and bf16 exact and bf16 fast: 55 in all. Other shapes and thread counts
in the run are checked too. Prints one line per check: PASS, MISS, or n/a
where the run cannot show it (a path, row or field it lacks: a run of some
shapes or dtypes, no oneDNN, no AVX512_BF16 for the fast mode, no second
thread, or a path whose grad_x failed the bench's cross-check, whose times
the bench then leaves null: all but its workspace), then how many were
met. Exit status: 0 when every check passes and none is n/a, 1 when one
misses, 2 when the input is not such a run (a run of `--op
forward|weight-grad`, whose rows carry "op", included), 3 when none misses
but some are n/a. Standard library only.

  build/bin/moegrad bench --json > run.json && bench/check_targets.py run.json
"""

import argparse
import json
import math
import sys

PEAK = {"zmoe": 0.90, "large-token": 0.80, "fine-grained": 0.75}
VS_ONEDNN = 0.95
HALF_RATE = 0.95
FAST_BF16 = 1.0
FAST_BF16_SHAPES = ("zmoe", "large-token")
THREADS = 1.85
WORKSPACE_SLACK = 4 << 20
# (shape, dtype, mode, threads) of the fused rows the issue's targets are set on.
ISSUE_ROWS = [(shape, dtype, mode, threads) for shape in PEAK for threads in (1, 2)
              for dtype, mode in (("f32", "exact"), ("f16", "exact"), ("bf16", "exact"), ("bf16", "fast-bf16"))]


class BadRun(Exception):
    pass


def number(row, field, what, positive):
    """row[field]: null, or a number (> 0 where `positive`, else >= 0)."""
    v = row[field]
    if v is None:
        return v
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
            or not (v > 0 if positive else v >= 0)):
        bound = "positive" if positive else "non-negative"
        raise BadRun(f"{what}: {field} is {json.dumps(v)}, not null or a {bound} number")
    return v


def load_rows(text):
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadRun(f"not JSON: {e}") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise BadRun("not a JSON array of objects (the output of `moegrad bench --json`)")
    peaks, paths = {}, {}
    for r in rows:
        if r.get("op") is not None:  # `moegrad bench --op forward|weight-grad`: the layer's other GEMMs
            raise BadRun(f"a row of --op {json.dumps(r['op'])}: issue 3's targets are grad-x's "
                         "(a run without --op)")
        try:
            key_types = ({"path": str, "threads": int} if r["path"] == "fma-peak" else
                         {"shape": str, "dtype": str, "mode": str, "threads": int, "path": str})
            for field, kind in key_types.items():
                if isinstance(r[field], bool) or not isinstance(r[field], kind):
                    kind_name = "a string" if kind is str else "an integer"
                    raise BadRun(f"a row's {field} is {json.dumps(r[field])}, not {kind_name}")
            if r["path"] == "fma-peak":
                if r["threads"] in peaks:  # the last would silently win: every %peak would change
                    raise BadRun(f"two fma-peak rows for {r['threads']} thread(s): give one run's output")
                peaks[r["threads"]] = number(r, "gflops", f"the {r['threads']}-thread fma-peak row", positive=True)
                continue
            key = (r["shape"], r["dtype"], r["mode"], r["threads"], r["path"])
            what = " ".join(map(str, key))
            ms, ms_min, ms_max = (number(r, field, what, positive=True) for field in ("ms", "ms_min", "ms_max"))
            number(r, "gflops", what, positive=True)
            number(r, "workspace_bytes", what, positive=False)
            for field in ("batch", "top_k"):  # L = batch*top_k sizes the workspace cap
                number(r, field, what, positive=True)
        except KeyError as e:
            raise BadRun(f"a row has no {e} field") from None
        if (r["ms"] is None) != (r["gflops"] is None):
            raise BadRun(f"{what}: ms and gflops must both be numbers or both null")
        if None not in (ms, ms_min, ms_max) and not ms_min <= ms <= ms_max:
            raise BadRun(f"{what}: ms {ms} is not within ms_min {ms_min} and ms_max {ms_max}")
        if key in paths:
            raise BadRun("two rows for " + " ".join(map(str, key)) + ": give one run's output")
        paths[key] = r
    if not paths:
        raise BadRun("no measured path in the input")
    return peaks, paths


ORDER = ("peak", "vs-onednn", "half-rate", "fast-bf16", "threads", "workspace")


def shown(value, bound):
    """value to 3 decimals, or to as many more as keep it on its side of the
    bound: 0.9504 against 0.95 must not read 0.950."""
    for digits in range(3, 18):
        text = f"{value:.{digits}f}"
        rounded = float(text)
        if (rounded < bound) == (value < bound) and (rounded > bound) == (value > bound):
            return text
    return repr(value)


class Checks:
    """The verdicts, printed grouped by target, rows in the run's order."""

    def __init__(self):
        self.entries = []  # (target's rank, line), in the run's order
        self.met = self.missed = self.unchecked = 0

    def ratio(self, name, what, value, bound, at_least):
        ok = value >= bound if at_least else value <= bound
        self.met += ok
        self.missed += not ok
        rel = ">=" if at_least else "<="
        self.add(name, f"{'PASS' if ok else 'MISS'}  {name:<10} {what}: {shown(value, bound)}x ({rel} {bound:g}x)")

    def na(self, name, what, why):
        self.unchecked += 1
        self.add(name, f"n/a   {name:<10} {what}: {why}")

    def add(self, name, line):
        self.entries.append((ORDER.index(name), line))

    def lines(self):
        # A stable sort by target keeps each target's lines in the run's order.
        return [line for _, line in sorted(self.entries, key=lambda e: e[0])]


def measured(row):
    return row is not None and row.get("ms") is not None


def targets(shape, dtype, mode, threads):
    """The targets a fused row is checked against, in ORDER's order."""
    if dtype == "f32" and mode == "exact":
        own = (["peak"] if shape in PEAK else []) + ["vs-onednn"] + (["threads"] if threads == 2 else [])
    elif mode == "exact":
        own = ["half-rate"]
    elif dtype == "bf16" and mode == "fast-bf16" and shape in FAST_BF16_SHAPES:
        own = ["fast-bf16"]
    else:
        own = []
    return own + ["workspace"]


def evaluate(name, key, what, row, peaks, paths):
    """Target `name` of the measured fused row `row` (key: shape, dtype,
    mode, threads; `what` names it): (line's label, ratio, bound, at_least),
    or the reason it cannot be shown."""
    shape, dtype, mode, threads = key
    if name == "peak":
        if not peaks.get(threads):
            return "no fma-peak row for this thread count"
        return what + " fused/fma-peak", row["gflops"] / peaks[threads], PEAK[shape], True
    if name == "vs-onednn":
        onednn = paths.get((shape, dtype, mode, threads, "onednn-nonfused"))
        if not measured(onednn):
            return "no oneDNN time"
        return what + " fused/oneDNN time", row["ms"] / onednn["ms"], VS_ONEDNN, False
    if name == "threads":
        one = paths.get((shape, dtype, mode, 1, "fused"))
        if not measured(one):
            return "no 1-thread fused time"
        return f"{shape} f32 fused 1-thread/2-thread time", one["ms"] / row["ms"], THREADS, True
    if name == "half-rate":
        f32 = paths.get((shape, "f32", "exact", threads, "fused"))
        if not measured(f32):
            return "no f32 fused time"
        return what + " GFLOP/s / f32's", row["gflops"] / f32["gflops"], HALF_RATE, True
    if name == "fast-bf16":
        onednn = paths.get((shape, "bf16", "exact", threads, "onednn-nonfused"))
        if not measured(onednn):
            return "no oneDNN bf16 time"
        return what + " fused/oneDNN bf16 time", row["ms"] / onednn["ms"], FAST_BF16, False
    # workspace
    if row.get("workspace_bytes") is None or row.get("batch") is None or row.get("top_k") is None:
        return "no workspace bytes, batch or top_k"
    cap = 8 * row["batch"] * row["top_k"] + WORKSPACE_SLACK
    return what + " workspace/(8*L + 4 MiB)", row["workspace_bytes"] / cap, 1.0, False


def check(peaks, paths):
    c = Checks()
    fused = [k[:4] for k in paths if k[4] == "fused"]  # in the run's order
    for key in fused + [r for r in ISSUE_ROWS if r not in fused]:
        shape, dtype, mode, threads = key
        row = paths.get(key + ("fused",))
        what = f"{shape} {dtype}{'' if mode == 'exact' else ' ' + mode} t={threads}"
        for name in targets(*key):
            # The workspace is known without a time: a row whose grad_x
            # failed the bench's check keeps its workspace_bytes.
            if row is None or (name != "workspace" and not measured(row)):
                c.na(name, what, "no fused row in this run" if row is None else
                     "no fused time (not measured, or its grad_x failed the bench's check)")
                continue
            result = evaluate(name, key, what, row, peaks, paths)
            if isinstance(result, str):
                c.na(name, what, result)
            else:
                c.ratio(name, *result)
    return c


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="the JSON that `moegrad bench --json` printed, or - for standard input")
    args = parser.parse_args(argv)
    try:
        # Strict UTF-8 from stdin too (its text layer would let bytes that
        # are not through as surrogates).
        if args.run == "-":
            text = sys.stdin.buffer.read().decode("utf-8")
        else:
            with open(args.run, encoding="utf-8") as f:
                text = f.read()
        peaks, paths = load_rows(text)
    except (OSError, UnicodeDecodeError, BadRun) as e:
        print(f"check_targets: error: {args.run}: {e}", file=sys.stderr)
        return 2
    c = check(peaks, paths)
    print("\n".join(c.lines()))
    print(f"{c.met} of {c.met + c.missed} checks met" + ("" if c.missed == 0 else f", {c.missed} missed") +
          ("" if c.unchecked == 0 else f", {c.unchecked} not checked"))
    return 1 if c.missed else 3 if c.unchecked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
