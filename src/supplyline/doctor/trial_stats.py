"""The arithmetic of a fix trial, on step durations alone (pure: no torch, no clock).

A segment's rate leaves its first step out: that step holds the switch itself (a rebuilt loader's
worker start-up, a background writer draining the previous segment's queue), which the job pays
once, not every step. A/B alternation compares each fixed segment with the unchanged segments on
either side of it, so a machine that slows down or speeds up during the trial moves both alike.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

MIN_RATED_STEPS = 2  # a segment needs this many steps after its first to have a rate


def rate(durations: list[float]) -> float | None:
    """Steps per second over these steps (None when there is no time to divide by)."""
    total = sum(durations)
    return len(durations) / total if durations and total > 0 else None


def segment_rate(durations: list[float], skip: int = 1) -> float | None:
    """A segment's steps per second, its first ``skip`` steps left out (at least the first)."""
    rest = durations[max(1, skip) :]
    return rate(rest) if len(rest) >= MIN_RATED_STEPS else None


def loader_skip(settings: dict[str, object]) -> int:
    """Steps a new loader's stretch leaves out of its rate: as many as it can hold ready
    (``num_workers × prefetch_factor``). Workers start one after another, and the first started
    fill their queues while the last are forked: the steps that take those batches wait for
    nothing. (Rated from its second step, a stretch with 8 workers read 6.2x where the truth was
    4.4x; from its ninth, 14x where 8x is the most the workers can give.)"""
    workers = settings.get("num_workers")
    prefetch = settings.get("prefetch_factor")
    if not isinstance(workers, int) or workers < 1:
        return 1
    return workers * (prefetch if isinstance(prefetch, int) and prefetch > 0 else 2)


def ab_schedule(total_steps: int, segments: int = 4, period: int | None = None, lead: int = 0) -> list[tuple[str, int]]:
    """``A B A B``: ``segments`` alternating stretches sharing ``total_steps`` (each at least 1 + 2 steps).

    ``period``: a cost paid every ``period`` steps (a checkpoint saved every 5 steps). Each stretch is
    then a whole number of periods, after ``lead`` unrated steps that make the first start right
    after such a step: every stretch holds the same number of them, all in its rated steps. (Seven-step
    stretches over saves every 5 steps hold one or two saves by chance, a 2x bias either way.)"""
    each = max(MIN_RATED_STEPS + 1, total_steps // segments)
    head: list[tuple[str, int]] = []
    if period:
        # Rounded up: a stretch of one save pays the first copy into fresh memory and one write's
        # jitter; two or more let the background writer reach its steady state.
        each = period * max(-(-each // period), -(-(MIN_RATED_STEPS + 1) // period))
        head = [(LEAD, lead)] if lead else []
    return head + [("A" if i % 2 == 0 else "B", each) for i in range(segments)]


LEAD = "lead"  # steps run unchanged before the A B A B stretches, to align them with a period; not rated


@dataclass(frozen=True)
class Measured:
    baseline_steps_per_s: float | None
    trial_steps_per_s: float | None
    speedup: float | None
    spread: tuple[float, float] | None  # lowest and highest speed-up of the pieces compared


def alternating(segments: list[tuple[str, list[float]]]) -> Measured:
    """Speed-up from alternating ``A``/``B`` segments of step durations.

    Rates pool every rated step of a kind; the spread is the range of each B segment's rate over
    the mean rate of the A segments next to it.
    """
    rated = [(label, d[1:]) for label, d in segments if len(d) - 1 >= MIN_RATED_STEPS]
    base = rate([x for label, d in rated if label == "A" for x in d])
    fixed = rate([x for label, d in rated if label == "B" for x in d])
    ratios: list[float] = []
    for i, (label, durations) in enumerate(rated):
        if label != "B":
            continue
        neighbours = [rate(rated[j][1]) for j in (i - 1, i + 1) if 0 <= j < len(rated) and rated[j][0] == "A"]
        around = [r for r in neighbours if r]
        here = rate(durations)
        if around and here:
            ratios.append(here / statistics.mean(around))
    speedup = fixed / base if fixed and base else None
    return Measured(base, fixed, speedup, (min(ratios), max(ratios)) if ratios else None)


def against_baseline(baseline: list[float], trial: list[float], pieces: int = 3) -> Measured:
    """Speed-up of one trial segment (first step already left out) over the observed steps.

    The spread is the range of the trial's ``pieces`` consecutive stretches, each over the baseline.
    """
    base, fixed = rate(baseline), rate(trial)
    if not base or not fixed:
        return Measured(base, fixed, None, None)
    size = max(1, len(trial) // pieces)
    chunks = [trial[i : i + size] for i in range(0, len(trial) - size + 1, size)]
    ratios = [r / base for r in (rate(c) for c in chunks) if r]
    return Measured(base, fixed, fixed / base, (min(ratios), max(ratios)) if ratios else None)
