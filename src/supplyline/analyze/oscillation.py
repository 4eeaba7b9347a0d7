"""Does a utilization series oscillate? GPU utilization that periodically drops from 100% to 0%
means the GPU waits for data (docs/how-it-works.md). The same shape in DataLoader workers' CPU says they
work in bursts.

Method: thresholds from the series' own low and high percentiles (so a GPU that swings 60..100
is judged like one that swings 0..100), a hysteresis band between them so noise around one level
does not count as crossings, then the rising edges: at least ``min_cycles`` of them, spaced
regularly (coefficient of variation of the periods at most ``max_period_cv``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from supplyline.collect.summary import percentile


@dataclass(frozen=True)
class OscillationResult:
    oscillates: bool
    period_s: float | None  # median time between rising edges
    duty_cycle: float | None  # share of time spent high, 0..1, over the whole cycles seen
    drops: int  # high -> low transitions
    low_level: float | None  # the series' low and high levels (5th / 95th percentiles)
    high_level: float | None
    reason: str  # why it does or does not oscillate, in words


def detect_oscillation(
    values: Sequence[float],
    interval_s: float | None = None,
    timestamps: Sequence[float] | None = None,
    min_amplitude: float = 20.0,
    min_cycles: int = 3,
    max_period_cv: float = 0.35,
) -> OscillationResult:
    """Judge ``values`` sampled every ``interval_s`` seconds (or at ``timestamps``).

    ``min_amplitude`` is in the series' own unit (percentage points for utilization): swings
    smaller than it are steady. None values (a field the device did not report) are skipped.
    """
    if (interval_s is None) == (timestamps is None):
        raise ValueError("give exactly one of interval_s or timestamps")
    if timestamps is None:
        assert interval_s is not None
        timestamps = [i * interval_s for i in range(len(values))]
    if len(timestamps) != len(values):
        raise ValueError("values and timestamps differ in length")
    points = [(t, float(v)) for t, v in zip(timestamps, values) if v is not None and not math.isnan(v)]
    need = 4 * min_cycles  # a cycle needs a high and a low stretch, each seen at least twice
    if len(points) < need:
        return _undecided(0, None, None, f"too short: {len(points)} samples, need at least {need}")
    levels = [v for _, v in points]
    low, high = percentile(levels, 5), percentile(levels, 95)
    if high - low < min_amplitude:
        return _undecided(0, low, high, f"steady: swings {high - low:.1f} < {min_amplitude:g} between low and high")
    states = _hysteresis([v for _, v in points], low + 0.3 * (high - low), low + 0.7 * (high - low))
    rises = [points[i][0] for i in range(1, len(states)) if states[i] and not states[i - 1]]
    drops = sum(1 for i in range(1, len(states)) if states[i - 1] and not states[i])
    if len(rises) < min_cycles + 1:
        return _undecided(drops, low, high, f"{max(0, len(rises) - 1)} full cycles seen, need {min_cycles}")
    periods = [b - a for a, b in itertools.pairwise(rises)]
    mean = sum(periods) / len(periods)
    cv = math.sqrt(sum((p - mean) ** 2 for p in periods) / len(periods)) / mean if mean > 0 else math.inf
    period = percentile(periods, 50)
    duty = _duty_cycle(points, states, rises[0], rises[-1])
    if cv > max_period_cv:
        return OscillationResult(
            False,
            period,
            duty,
            drops,
            low,
            high,
            f"irregular: periods vary by {cv:.0%} (more than {max_period_cv:.0%})",
        )
    return OscillationResult(
        True,
        period,
        duty,
        drops,
        low,
        high,
        f"drops from ~{high:.0f} to ~{low:.0f} every {period:.2f} s, high {duty:.0%} of the time",
    )


def _hysteresis(values: list[float], lower: float, upper: float) -> list[bool]:
    """High/low state per sample: it turns high above ``upper``, low below ``lower``, else holds."""
    state = values[0] >= (lower + upper) / 2
    states = []
    for v in values:
        if v >= upper:
            state = True
        elif v <= lower:
            state = False
        states.append(state)
    return states


def _duty_cycle(points: list[tuple[float, float]], states: list[bool], start: float, end: float) -> float:
    # Each sample stands for the time until the next one; only whole cycles count.
    high = total = 0.0
    for i in range(len(points) - 1):
        t, t_next = points[i][0], points[i + 1][0]
        if t < start or t >= end:
            continue
        total += t_next - t
        if states[i]:
            high += t_next - t
    return high / total if total > 0 else 0.0


def _undecided(drops: int, low: float | None, high: float | None, reason: str) -> OscillationResult:
    return OscillationResult(False, None, None, drops, low, high, reason)
