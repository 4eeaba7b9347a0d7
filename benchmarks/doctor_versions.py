"""The doctor's overhead before and after a change: the same job under two source trees' doctors,
alternated in one run, plain python beside them, reported as ratios with their spread.

    python benchmarks/doctor_versions.py OLD_SRC [--repeats 7] [--steps 600]

OLD_SRC is another checkout's ``src`` folder (e.g. ``git worktree add /tmp/old REV``, then
``/tmp/old/src``); the new tree is this one. Each repeat runs plain, old doctor and new doctor
in turn, so drift on a shared machine falls on all three alike.
"""

from __future__ import annotations

import argparse
import os
import statistics

import doctor_overhead as base

HERE = os.path.dirname(os.path.abspath(__file__))
NEW_SRC = os.path.join(os.path.dirname(HERE), "src")


def doctor_run(src: str, steps: int, out_dir: str) -> float:
    """Wall seconds per step of the job's loop under the doctor of the tree at ``src``."""
    wall, _, steps_run, _ = base.run(True, steps, out_dir, env=dict(os.environ, PYTHONPATH=src))
    return wall / steps_run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old_src", help="the other tree's src folder")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=600)
    args = ap.parse_args()
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "supplyline-versions-report")
    plain, old, new = [], [], []
    for k in range(args.repeats):
        wall, _, n, _ = base.run(False, args.steps, out)
        plain.append(wall / n)
        # Alternate which doctor goes first, so neither always runs on a warmer machine.
        first, second = (args.old_src, NEW_SRC) if k % 2 == 0 else (NEW_SRC, args.old_src)
        a, b = doctor_run(first, args.steps, out), doctor_run(second, args.steps, out)
        (old if first == args.old_src else new).append(a)
        (new if first == args.old_src else old).append(b)
    p, o, n_ = statistics.median(plain), statistics.median(old), statistics.median(new)
    pairs = sorted(x / y for x, y in zip(new, old))
    print(
        f"step: plain {p * 1e3:.2f} ms · old doctor {o * 1e3:.2f} ms · new doctor {n_ * 1e3:.2f} ms (medians of {args.repeats})"
    )
    print(f"overhead vs plain: old {o / p:.4f}x · new {n_ / p:.4f}x")
    print(f"new/old doctor: {n_ / o:.4f}x (per-repeat ratios {pairs[0]:.3f}–{pairs[-1]:.3f})")


if __name__ == "__main__":
    main()
