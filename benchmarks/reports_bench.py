"""Costs of the report side, measured side by side and printed as ratios.

1. The live panel: a job that prints every step, timed under a pseudo-terminal with and without
   `--live` (median step time from the two records); one panel refresh; and the cost of one printed
   line through the panel's proxy vs through rich's Live (why render/inplace.py exists).
2. report.html: build time and size for a long run (a real record's steps repeated to 5000).

Usage: PYTHONPATH=src python benchmarks/reports_bench.py
"""

from __future__ import annotations

import copy
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reports"))

from reports_helpers import with_monitor, zoo  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.live import Live  # noqa: E402
from test_reports_live import run_in_pty  # noqa: E402

from supplyline.collect.steps import StepClock  # noqa: E402
from supplyline.record import RunRecord, load_record  # noqa: E402
from supplyline.render.html import build_html  # noqa: E402
from supplyline.render.inplace import TerminalPanel  # noqa: E402
from supplyline.render.live import latest_sample, panel, recent_steps  # noqa: E402


def doctor(out: str, live: bool) -> RunRecord:
    args = [
        sys.executable,
        "-m",
        "supplyline",
        "doctor",
        "--steps",
        "150",
        "--no-what-if",
        "--out",
        out,
        zoo("chatty.py"),
        "0.002",
    ]
    if live:
        args.insert(4, "--live")
    rc, _ = run_in_pty(args, cwd=os.path.dirname(out))
    assert rc == 0
    return load_record(out)


def live_overhead(tmp: str) -> None:
    plain, live = [], []
    for k in range(2):  # interleaved: the machine's load drifts
        plain.append(statistics.median(doctor(os.path.join(tmp, f"plain{k}"), False).steps["duration_s"][1:]))
        live.append(statistics.median(doctor(os.path.join(tmp, f"live{k}"), True).steps["duration_s"][1:]))
    p, lv = statistics.median(plain), statistics.median(live)
    print(
        f"live view: median step {lv * 1e3:.2f} ms with --live vs {p * 1e3:.2f} ms without "
        f"(ratio {lv / p:.3f}; the job prints one 170-character line per step)"
    )


def panel_cost(record: RunRecord) -> None:
    clock = StepClock()
    for key, values in record.steps.items():
        clock.steps[key].extend(values)
    monitor = type("M", (), {"samples": record.monitor["samples"]})()

    def render() -> Any:
        return panel("train.py", recent_steps(clock, 20), latest_sample(monitor), 1.0)

    with open(os.devnull, "w") as sink:
        screen = TerminalPanel(render, sink)
        n = 300
        t = time.perf_counter()
        for _ in range(n):
            screen.refresh()
        per = (time.perf_counter() - t) / n
        print(
            f"live panel: {per * 1e6:.0f} µs per refresh (built and drawn by rich, off the training thread); "
            f"at 2 refreshes/s {per * 2 * 100:.2f}% of one core"
        )
        inplace = _per_print(sink, lambda: TerminalPanel(render, sink, refresh_s=3600), True)
        rich_live = _per_print(
            sink,
            lambda: Live(
                get_renderable=render,
                auto_refresh=False,
                redirect_stdout=True,
                console=Console(file=sink, force_terminal=True, width=100),
            ),
            False,
        )
    print(
        f"one printed line under the panel: {inplace * 1e6:.1f} µs (in-place proxy) vs {rich_live * 1e6:.1f} µs "
        f"(rich Live): {rich_live / inplace:.0f}× cheaper, paid on the training thread"
    )


def _per_print(sink: Any, make: Callable[[], Any], ours: bool, n: int = 3000) -> float:
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = sink
    line = "LINE 0001 loss=1.2345 " + "abcdefghijklmnopqrstuvwxyz0123456789" * 4 + " END"
    display = make()
    if ours:
        display.start(redirect_stdout=True)
    else:
        display.start()
    try:
        t = time.perf_counter()
        for _ in range(n):
            print(line)
        return (time.perf_counter() - t) / n
    finally:
        display.stop()
        sys.stdout, sys.stderr = saved


def html_cost(record: RunRecord) -> None:
    data = copy.deepcopy(record.to_dict())
    st = data["steps"]
    reps = 5000 // len(st["duration_s"]) + 1
    span = max(s + d for s, d in zip(st["start_s"], st["duration_s"]))
    for key in st:
        st[key] = [v + (span * r if key == "start_s" else 0) for r in range(reps) for v in st[key]][:5000]
    big = with_monitor(RunRecord.from_dict(data), interval_s=span * reps / 2000)
    t = time.perf_counter()
    page = build_html(big)
    took = time.perf_counter() - t
    import json

    record_bytes = len(json.dumps(big.to_dict()))
    print(
        f"report.html for 5000 steps and {len(big.monitor['samples'])} monitor samples: built in {took:.2f} s, "
        f"{len(page) / 2**20:.2f} MiB = {len(page) / record_bytes:.2f}× the record's JSON"
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        live_overhead(tmp)
        rec = with_monitor(load_record(os.path.join(tmp, "plain0")))
        panel_cost(rec)
        html_cost(rec)
