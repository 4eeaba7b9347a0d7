"""Cost of the read-your-writes barrier (fixes/_barrier.py) on the file-system calls a training step
makes, as ratios against the same calls without it, in one process.

Three states, alternated round by round so drift touches all alike:
- off: no barrier installed (the plain os / open functions);
- idle: installed, nothing pending (the state of every step between saves): one dict check a call;
- pending: installed, a write pending in another folder (the steps while a save is in flight): the
  path of each call is compared with the pending one.
Each round times CALLS calls of each kind: os.stat, os.path.exists, open+close, os.listdir.
The ratio is per round (state / off); the figure is the median with the min–max over rounds.

Run: PYTHONPATH=src python benchmarks/barrier_overhead.py [ROUNDS] [CALLS]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from supplyline.fixes import _barrier


def calls(folder: str) -> dict[str, Callable[[], object]]:
    path = os.path.join(folder, "data.bin")
    with open(path, "wb") as fh:
        fh.write(b"x" * 4096)
    return {
        "os.stat": lambda: os.stat(path),
        "os.path.exists": lambda: os.path.exists(path),
        "open+close": lambda: open(path, "rb").close(),
        "os.listdir": lambda: os.listdir(folder),
    }


def time_calls(fn: Callable[[], object], n: int) -> float:
    """Nanoseconds per call (looked up each time, as the script's own code does)."""
    t = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t) / n


def main(rounds: int = 7, n: int = 20000) -> None:
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as ckpt:
        kinds = calls(data)
        ns: dict[tuple[str, str], list[float]] = {}
        for r in range(rounds):
            states = ["off", "idle", "pending"]
            states = states[r % 3 :] + states[: r % 3]  # rotate the order: no state always goes first
            for state in states:
                write = None
                if state != "off":
                    _barrier.acquire()
                if state == "pending":
                    write = _barrier.begin(os.path.join(ckpt, "last.pth.tar"))
                try:
                    for kind, fn in kinds.items():
                        ns.setdefault((state, kind), []).append(time_calls(fn, n))
                finally:
                    if write is not None:
                        _barrier.end(write)
                    if state != "off":
                        _barrier.release()
        print(f"barrier overhead, {rounds} rounds of {n} calls, load {os.getloadavg()[0]:.2f}")
        print(f"{'call':<16}{'off ns':>9}{'idle ns':>9}{'idle/off':>22}{'pending ns':>12}{'pending/off':>22}")
        for kind in kinds:
            off = ns[("off", kind)]
            row = f"{kind:<16}{statistics.median(off):>9.0f}"
            for state in ("idle", "pending"):
                mine = ns[(state, kind)]
                ratios = [m / o for m, o in zip(mine, off)]
                spread = f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
                row += f"{statistics.median(mine):>{9 if state == 'idle' else 12}.0f}{spread:>22}"
            print(row)
        extra = [statistics.median(ns[("idle", k)]) - statistics.median(ns[("off", k)]) for k in kinds]
        print(f"idle barrier: {statistics.median(extra):+.0f} ns a call (median over the kinds of call)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
