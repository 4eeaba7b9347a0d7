"""`supplyline doctor --live`: a compact panel, refreshed in place on stderr while the job runs.

The panel reads what the collectors already keep: the StepClock's columnar step lists (appends on
the training thread; here we only read lengths and the last N entries) and the monitor's latest
sample. A daemon thread builds the panel twice a second (render/inplace.py), so the training
thread pays nothing beyond its usual hooks and a few plain writes per printed line.

Coexisting with the script's output: ``sys.stdout``/``sys.stderr`` are replaced by proxies that
write each complete line *above* the panel, so the script's lines arrive whole and in order.
stdout is redirected only when it is the same terminal as stderr; a script whose stdout goes to
a pipe or file keeps writing there untouched.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.text import Text

from supplyline import phases as P
from supplyline.collect.steps import StepClock
from supplyline.render.inplace import TerminalPanel

# The hooked phases the clock measures directly (from the phase table); the rest of a step is the
# model and the user's code, drawn in the compute colour.
LIVE_PHASES = tuple(p for p in P.STEP_PHASES if p.hooked)
REST_STYLE = P.style(P.COMPUTE)


def recent_steps(clock: StepClock, window: int) -> dict[str, list[float]]:
    """The last ``window`` closed steps. ``whatif`` is appended last in a step, so its length is
    the number of steps whose every column is written."""
    s = clock.steps
    n = len(s["whatif"])
    lo = max(0, n - window)
    return {k: v[lo:n] for k, v in s.items()} | {"count": [float(n)]}


def latest_sample(monitor: Any) -> dict[str, Any] | None:
    """The monitor's newest sample as a dict, or None (no monitor, no sample yet, or another API)."""
    if monitor is None:
        return None
    try:
        samples = getattr(monitor, "samples", None)
        sample = samples[-1] if samples else None
    except Exception:  # a monitor mid-update must never break the display
        return None
    if sample is None:
        return None
    return sample if isinstance(sample, dict) else sample.to_dict()


def _bar(parts: list[tuple[float, str]], width: int = 20) -> Text:
    bar = Text()
    used = 0
    for share, style in parts:
        n = min(width - used, round(share * width))
        bar.append("█" * n, style=style)
        used += n
    bar.append("·" * (width - used), style="dim")
    return bar


def panel(title: str, steps: dict[str, list[float]], sample: dict[str, Any] | None, elapsed_s: float) -> Group:
    count = int(steps["count"][0])
    dur = steps["duration_s"]
    head = Text(f"supplyline doctor ▸ {title}", style="bold")
    head.append(f" · {elapsed_s:.1f} s · {count} steps")
    lines: list[Text] = [head]
    total = sum(dur)
    if not dur or total <= 0:
        lines.append(Text("waiting for the first training step…", style="dim"))
    else:
        lines.append(
            Text(
                f"rate   {len(dur) / total:.1f} steps/s · {total * 1e3 / len(dur):.0f} ms/step (last {len(dur)} steps)"
            )
        )
        shares = [(sum(steps.get(f"{p.name}_s", [])) / total, p) for p in LIVE_PHASES]
        rest = max(0.0, 1.0 - sum(s for s, _ in shares))
        parts = [(s, p.style) for s, p in shares] + [(rest, REST_STYLE)]
        split = Text("phases ")
        split.append_text(_bar(parts))
        for s, p in shares:
            if s >= 0.005:
                split.append(f" {p.label} {s * 100:.0f}%", style=p.style)
        split.append(f" model+code {rest * 100:.0f}%", style=REST_STYLE)
        lines.append(split)
    lines.extend(_host_lines(sample))
    return Group(*lines)


def _host_lines(sample: dict[str, Any] | None) -> list[Text]:
    if sample is None:
        return [Text("host: no monitor sample yet (or the monitor is not available)", style="dim")]
    cpu = sample["cpu"]
    procs = sample.get("processes", [])
    workers = [p for p in procs if p["role"] != "root"]
    trainer = next((p for p in procs if p["role"] == "root"), None)
    cpu_line = Text(f"CPU host {cpu['busy_pct']:.0f}%")
    if trainer is not None:
        cpu_line.append(f" · trainer {trainer['cpu_pct']:.0f}%")
    if workers:
        each = " ".join(f"{p['cpu_pct']:.0f}" for p in workers[:12])
        cpu_line.append(f" · {len(workers)} workers: {each} (% of a core)")
    out = [cpu_line]
    disks = sorted(sample.get("disks", []), key=lambda d: -(d["read_mb_per_s"] + d["write_mb_per_s"]))[:2]
    if disks:
        out.append(
            Text(
                "disk "
                + " · ".join(
                    f"{d['device']} r {d['read_mb_per_s']:.0f} w {d['write_mb_per_s']:.0f} MB/s "
                    f"{d['util_pct']:.0f}% util"
                    for d in disks
                )
            )
        )
    gpus = [g for g in sample.get("gpus", []) if g.get("util_pct") is not None]
    out.append(
        Text(
            "GPU " + (" · ".join(f"{g['index']}: {g['util_pct']:.0f}%" for g in gpus) if gpus else "not available"),
            style="" if gpus else "dim",
        )
    )
    return out


class LiveView:
    """Owns the panel; ``start`` returns False (and shows nothing) without a terminal on stderr."""

    def __init__(self, title: str, clock: StepClock, monitor: Callable[[], Any], window: int = 20) -> None:
        self.title = title
        self.clock = clock
        self.monitor = monitor
        self.window = window
        self.live: TerminalPanel | None = None

    def render(self) -> Group:
        return panel(
            self.title, recent_steps(self.clock, self.window), latest_sample(self.monitor()), self.clock.elapsed()
        )

    def start(self) -> bool:
        if not sys.stderr.isatty():
            return False
        self.live = TerminalPanel(self.render, sys.stderr)
        self.live.start(redirect_stdout=_same_terminal())
        return True

    def stop(self) -> None:
        if self.live is not None:
            live, self.live = self.live, None
            try:
                live.stop()
            except Exception:  # restoring the terminal must not change the script's outcome
                pass


def _same_terminal() -> bool:
    try:
        return sys.stdout.isatty() and os.ttyname(sys.stdout.fileno()) == os.ttyname(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
