"""How noisy is one run of an unchanged job, and how many runs a side does a 10% compare gate need?

Runs the planted steady job (tests/stats/zoo/steady.py: a 30 ms sleep per batch plus a tiny model
step) N times unchanged and M times made 40% slower (42 ms), alternating, as `supplyline doctor
--steps 40` runs; or reads runs made before (`--from DIR`: DIR/same*, DIR/slow*). Then it reports:
- each run's median step and the run-to-run spread of the medians (max/min - 1, and the
  largest ratio between two runs): what one run a side cannot see;
- for k = 1, 2, 3 runs a side, the gate (`compare --max-slowdown 10`) on disjoint groups of runs:
  unchanged against unchanged (every ordered pair of groups) and unchanged against 40% slower:
  how many pass/fail, and the median half-width of the interval the gate decided on.

`--load` starts two busy-loop processes during every other run, a stand-in for a neighbour's test
suite starting and stopping between runs on the shared 2-core machine.

Run: python benchmarks/compare_gate_noise.py [--same 8] [--slow 4] [--load] [--out DIR] [--from DIR]
"""

from __future__ import annotations

import argparse
import glob
import itertools
import os
import subprocess
import sys
import tempfile

import numpy as np

from supplyline.analyze import stats
from supplyline.analyze.compare import observed_step_times
from supplyline.analyze.report import report_from_saved

JOB = os.path.join(os.path.dirname(__file__), "..", "tests", "stats", "zoo", "steady.py")
LIMIT = 10.0


def doctor(out: str, sleep_ms: str) -> None:
    cmd = [sys.executable, "-m", "supplyline", "doctor", "--quiet", "--no-what-if", "--no-try", "--steps", "40"]
    subprocess.run([*cmd, "--out", out, JOB, sleep_ms], check=True, capture_output=True)


def make_runs(root: str, same: int, slow: int, load: bool) -> None:
    for i in range(max(same, slow)):
        hogs = []
        if load and i % 2 == 0:
            hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2)]
        try:
            if i < same:
                doctor(os.path.join(root, f"same{i}"), "30")
            if i < slow:
                doctor(os.path.join(root, f"slow{i}"), "42")
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        print(f"run {i}: load average {os.getloadavg()[0]:.2f}", file=sys.stderr)


def steps(root: str, prefix: str) -> list[np.ndarray]:
    paths = sorted(glob.glob(os.path.join(root, prefix + "*")), key=lambda p: int(p.rsplit(prefix, 1)[1]))
    return [np.asarray(observed_step_times(report_from_saved(p)[0])) for p in paths]


def groups(runs: list[np.ndarray], k: int) -> list[list[np.ndarray]]:
    return [runs[i : i + k] for i in range(0, len(runs) - k + 1, k)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--same", type=int, default=8)
    ap.add_argument("--slow", type=int, default=4)
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--from", dest="src")
    a = ap.parse_args()
    root = a.src or a.out or tempfile.mkdtemp(prefix="gate-noise-")
    if not a.src:
        make_runs(root, a.same, a.slow, a.load)
    same, slow = steps(root, "same"), steps(root, "slow")
    medians = np.array([np.median(r) for r in same]) * 1e3
    print(f"{len(same)} unchanged runs, median step (ms): " + " ".join(f"{m:.2f}" for m in medians))
    print(f"run-to-run spread of the medians: {(medians.max() / medians.min() - 1) * 100:.1f}% (max/min)")
    if slow:
        print("40%-slower runs (ms): " + " ".join(f"{np.median(r) * 1e3:.2f}" for r in slow))
    print("| runs a side | unchanged vs unchanged: failed/pairs | decision ±% (median) | 40% slower: failed/pairs |")
    print("|---|---|---|---|")
    for k in (1, 2, 3):
        sg, wg = groups(same, k), groups(slow, k)
        if len(sg) < 2:
            break
        tests = [stats.compare_step_times(b, n, LIMIT) for b, n in itertools.permutations(sg, 2)]
        slower = [stats.compare_step_times(b, n, LIMIT) for b, n in itertools.product(sg, wg)]
        width = np.median([t.noise_pct for t in tests])
        slow_text = f"{sum(t.failed for t in slower)}/{len(slower)}" if slower else "—"
        print(f"| {k} | {sum(t.failed for t in tests)}/{len(tests)} | ±{width:.1f}% | {slow_text} |")
    print(f"runs in {root}; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
