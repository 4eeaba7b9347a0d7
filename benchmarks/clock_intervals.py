"""Per-step cost of keeping phase intervals for the GPU-idle attribution (StepClock.keep_intervals).

A step on the training thread does about four outer phases (fetch, backward, optimizer, a print);
this times enter/leave pairs with and without intervals, in alternating rounds, and prints the
extra nanoseconds per pair as median and spread over the rounds.

    python benchmarks/clock_intervals.py [--pairs 200000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import time

from supplyline import phases as P
from supplyline.collect.steps import StepClock


def one(pairs: int, keep: bool) -> float:
    clock = StepClock()
    if keep:
        clock.keep_intervals()
    enter, leave = clock.enter, clock.leave
    t0 = time.perf_counter()
    for _ in range(pairs):
        leave(P.LOGGING, enter(P.LOGGING))
    return (time.perf_counter() - t0) / pairs * 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    off, on = [], []
    for _ in range(a.rounds):
        off.append(one(a.pairs, False))
        on.append(one(a.pairs, True))
    extra = [b - x for x, b in zip(off, on)]
    ratio = [b / x for x, b in zip(off, on)]
    print(
        f"enter+leave: {statistics.median(off):.0f} ns without intervals, {statistics.median(on):.0f} ns with; "
        f"extra {statistics.median(extra):.0f} ns per pair (min {min(extra):.0f}, max {max(extra):.0f}); "
        f"ratio {statistics.median(ratio):.2f} (min {min(ratio):.2f}, max {max(ratio):.2f}) over {a.rounds} rounds"
    )


if __name__ == "__main__":
    main()
