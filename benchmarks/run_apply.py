"""`supplyline run --apply num_workers=2` against the unchanged planted starved job, alternating.

    PYTHONPATH=src python benchmarks/run_apply.py [--steps 150] [--repeats 3] [--apply num_workers=2]

The job (tests/apply/zoo/starved.py: 1 ms of Python work per sample, 16 samples a batch,
``num_workers=0``) prints its own steps/s from its second step to its last, so both arms are timed
by the same code and start-up is left out. Runs alternate (plain, applied, plain, ...) so drift on a
shared machine hits both arms alike; the result is the ratio of medians with the min-max spread of
the per-pair ratios.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(os.path.dirname(HERE), "tests", "apply", "zoo", "starved.py")


def rate(command: list[str]) -> float:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    found = re.search(r"^rate ([\d.]+) steps/s$", proc.stdout, flags=re.M)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"benchmark run failed ({proc.returncode}): {proc.stderr[-500:]}")
    return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--apply", default="num_workers=2")
    args = parser.parse_args()
    plain_cmd = [sys.executable, JOB, str(args.steps)]
    applied_cmd = [sys.executable, "-m", "supplyline", "run", "--apply", args.apply, JOB, str(args.steps)]
    plain, applied = [], []
    for i in range(args.repeats):
        plain.append(rate(plain_cmd))
        applied.append(rate(applied_cmd))
        print(f"pair {i + 1}: unchanged {plain[-1]:.1f} steps/s, run --apply {args.apply} {applied[-1]:.1f} steps/s")
    ratios = [a / p for p, a in zip(plain, applied)]
    print(
        f"unchanged median {statistics.median(plain):.1f} steps/s (range {min(plain):.1f}-{max(plain):.1f}); "
        f"run --apply {args.apply} median {statistics.median(applied):.1f} (range {min(applied):.1f}-{max(applied):.1f})"
    )
    print(
        f"speed-up {statistics.median(applied) / statistics.median(plain):.2f}x "
        f"(per-pair ratios {min(ratios):.2f}-{max(ratios):.2f}, {args.repeats} alternating pairs)"
    )


if __name__ == "__main__":
    main()
