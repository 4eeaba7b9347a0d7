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

`--job cpu` runs tests/stats/zoo/cpu_step.py instead: a 1 ms step of the training thread's own CPU
work (1.6 units of it: 40% slower, the model step included), `doctor --steps 300`. Under `--load` its training thread waits for a CPU 33-46% of the
loaded runs' time; the gate compares step time less the training thread's wait for a CPU (`cpu_wait_s`),
and the table shows both: the gate as `compare` runs it, and wall time alone.

Run: python benchmarks/compare_gate_noise.py [--job steady|cpu] [--same 8] [--slow 4] [--load] [--out DIR] [--from DIR]
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
from supplyline.analyze.compare import gate_times, observed_step_times
from supplyline.analyze.report import report_from_saved
from supplyline.record import RunRecord

ZOO = os.path.join(os.path.dirname(__file__), "..", "tests", "stats", "zoo")
# job: (script, unchanged argument, 40% slower argument, --steps)
JOBS = {"steady": ("steady.py", "30", "42", "40"), "cpu": ("cpu_step.py", "1", "1.6", "300")}
LIMIT = 10.0


def make_runs(root: str, same: int, slow: int, load: bool, job: str) -> None:
    script, arg_same, arg_slow, n_steps = JOBS[job]
    cmd = [sys.executable, "-m", "supplyline", "doctor", "--quiet", "--no-what-if", "--no-try", "--steps", n_steps]

    def doctor(out: str, arg: str) -> None:
        subprocess.run([*cmd, "--out", out, os.path.join(ZOO, script), arg], check=True, capture_output=True)

    for i in range(max(same, slow)):
        hogs = []
        if load and i % 2 == 0:
            hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2)]
        try:
            if i < same:
                doctor(os.path.join(root, f"same{i}"), arg_same)
            if i < slow:
                doctor(os.path.join(root, f"slow{i}"), arg_slow)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        print(f"run {i}: load average {os.getloadavg()[0]:.2f}", file=sys.stderr)


def records(root: str, prefix: str) -> list[RunRecord]:
    paths = sorted(glob.glob(os.path.join(root, prefix + "*")), key=lambda p: int(p.rsplit(prefix, 1)[1]))
    return [report_from_saved(p)[0] for p in paths]


def groups(runs: list[RunRecord], k: int) -> list[list[RunRecord]]:
    return [runs[i : i + k] for i in range(0, len(runs) - k + 1, k)]


def gate(base: list[RunRecord], new: list[RunRecord], wall: bool) -> stats.SlowdownTest:
    """The gate as `compare --max-slowdown 10` decides it (``wall``: on wall time alone)."""
    if wall:
        return stats.compare_step_times(
            [observed_step_times(r) for r in base], [observed_step_times(r) for r in new], LIMIT
        )
    b, n, basis = gate_times(base, new)
    return stats.compare_step_times(b, n, LIMIT, what=basis.what)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--same", type=int, default=8)
    ap.add_argument("--slow", type=int, default=4)
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--job", choices=sorted(JOBS), default="steady")
    ap.add_argument("--out")
    ap.add_argument("--from", dest="src")
    a = ap.parse_args()
    root = a.src or a.out or tempfile.mkdtemp(prefix="gate-noise-")
    if not a.src:
        make_runs(root, a.same, a.slow, a.load, a.job)
    same, slow = records(root, "same"), records(root, "slow")
    medians = np.array([np.median(observed_step_times(r)) for r in same]) * 1e3
    print(f"{len(same)} unchanged runs, median step (ms): " + " ".join(f"{m:.2f}" for m in medians))
    print(f"run-to-run spread of the medians: {(medians.max() / medians.min() - 1) * 100:.1f}% (max/min)")
    if slow:
        print("40%-slower runs (ms): " + " ".join(f"{np.median(observed_step_times(r)) * 1e3:.2f}" for r in slow))
    shares = [gate_times([r], [r])[2].base_wait_share for r in same]
    print("unchanged runs' wait for a CPU (share of step time): " + " ".join(f"{s or 0:.0%}" for s in shares))
    print(
        "| runs a side | gate on | unchanged vs unchanged: failed/pairs | decision ±% (median) | 40% slower: failed/pairs |"
    )
    print("|---|---|---|---|---|")
    for k in (1, 2, 3):
        sg, wg = groups(same, k), groups(slow, k)
        if len(sg) < 2:
            break
        for wall in (False, True):
            tests = [gate(b, n, wall) for b, n in itertools.permutations(sg, 2)]
            slower = [gate(b, n, wall) for b, n in itertools.product(sg, wg)]
            width = np.median([t.noise_pct for t in tests])
            slow_text = f"{sum(t.failed for t in slower)}/{len(slower)}" if slower else "—"
            on = "wall time" if wall else "compare's basis"
            print(f"| {k} | {on} | {sum(t.failed for t in tests)}/{len(tests)} | ±{width:.1f}% | {slow_text} |")
    print(f"runs in {root}; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
