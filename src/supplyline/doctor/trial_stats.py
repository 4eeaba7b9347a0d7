"""The arithmetic of a fix trial, on step durations alone (pure: no torch, no clock).

A segment's rate leaves its first step out: that step holds the switch itself (a rebuilt loader's
worker start-up, a background writer draining the previous segment's queue), which the job pays
once, not every step. A/B alternation compares each fixed segment with the unchanged segments on
either side of it, so a machine that slows down or speeds up during the trial moves both alike.
"""

from __future__ import annotations

import math
import random
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


MAX_INVENTORY_FACTOR = 3.0


def inventory_factor(ready: list[int | None], skip: int) -> float:
    """How much longer the rated steps (``skip`` on) would take in the loader's steady state.

    A stretch that starts with batches ready and ends with fewer took them faster than its workers
    make them: it consumed ``n`` batches while its workers made ``n + ready_end - ready_start``, and
    in the steady state the loop can only take what the workers make. So the rated steps' times are
    scaled by ``n / made`` (more than 1 when the stretch drew down its queue, less when the queue
    grew). On the planted prep-bound job (16 ms of per-sample work a batch, 2 workers) a stretch's
    10 rated steps after the 8 ready batches ran at 197 steps/s where the workers make ~100.
    ``ready[i]``: batches held ready at the end of step ``i``; None where it could not be read."""
    n = len(ready) - skip
    if n < 1 or skip < 1 or ready[skip - 1] is None or ready[-1] is None:
        return 1.0
    made = n + ready[-1] - ready[skip - 1]  # type: ignore[operator]  # both checked for None just above
    if made <= 0:
        return MAX_INVENTORY_FACTOR
    return min(MAX_INVENTORY_FACTOR, max(1.0 / MAX_INVENTORY_FACTOR, n / made))


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


MIN_PERIODS = 3  # periods in a stretch over a periodic cost: the first, and two of the steady state to draw from


def ab_schedule(total_steps: int, segments: int = 4, period: int | None = None, lead: int = 0) -> list[tuple[str, int]]:
    """``A B A B``: ``segments`` alternating stretches sharing ``total_steps`` (each at least 1 + 2 steps).

    ``period``: a cost paid every ``period`` steps (a checkpoint saved every 5 steps). Each stretch is
    then a whole number of periods, after ``lead`` unrated steps that make the first start right
    after such a step: every stretch holds the same number of them, all in its rated steps. (Seven-step
    stretches over saves every 5 steps hold one or two saves by chance, a 2x bias either way.)"""
    each = max(MIN_RATED_STEPS + 1, total_steps // segments)
    head: list[tuple[str, int]] = []
    if period:
        # Rounded up, to at least MIN_PERIODS where one stretch of them fits in the steps asked for:
        # a stretch's first save finds the background writer idle, the later ones find it busy (its
        # steady state), and the interval draws from those.
        least = MIN_PERIODS if period * MIN_PERIODS <= total_steps else 1  # within the budget's reach
        each = period * max(-(-each // period), -(-(MIN_RATED_STEPS + 1) // period), least)
        head = [(LEAD, lead)] if lead else []
    return head + [("A" if i % 2 == 0 else "B", each) for i in range(segments)]


LEAD = "lead"  # steps run unchanged before the A B A B stretches, to align them with a period; not rated


@dataclass(frozen=True)
class Measured:
    baseline_steps_per_s: float | None
    trial_steps_per_s: float | None
    speedup: float | None
    spread: tuple[float, float] | None  # the speed-up's 95% interval (block bootstrap), always holding it


BOOT_ROUNDS = 400  # resamples: ~2 ms for a 100-step trial; the interval's ends move by <1% between seeds
BOOT_SEED = 20  # fixed: the same steps give the same interval, in the report and in its re-render


def _resample(stretch: list[float], rng: random.Random, period: int | None = None) -> list[float]:
    """A moving-block resample of one stretch's steps, as long as the stretch: blocks of about
    sqrt(n) consecutive steps keep the step-to-step correlation (a slow spell of the machine lasts
    several steps) that a resample of single steps would break up and call precision.

    ``period``: a cost paid every ``period`` steps (a save every 5). The stretch's first period is
    kept as it is, and the rest is resampled in (circular) windows of ``period`` steps: any ``period``
    consecutive steps hold exactly one such step, so every resample holds as many as the stretch
    did. The first period is apart because it differs: a background writer starts a stretch idle,
    so its first save is cheap (4 ms) and each later one waits for the write before it (35-89 ms
    on the planted 32 MB job). (Blocks of sqrt(n) steps drew 0 to 3 of a stretch's 2 saves, and
    whole-period windows over a whole stretch drew its cheap save twice: intervals of 0.36-5.1x
    and 0.56-3.5x on a job whose truth was 0.70-0.81x.)"""
    n = len(stretch)
    if period and n > period:
        # The rest is the last whole periods; windows wrap around its end, so each of its steps is
        # drawn as often as any other (the last step carries the writer's unfinished work, and
        # windows that stop at the end drew it a fifth as often: a +5% bias to the fix).
        size = (n - 1) // period * period
        head, rest = list(stretch[: n - size]), stretch[n - size :]
        for _ in range(size // period):
            start = rng.randrange(size)
            head.extend(rest[(start + j) % size] for j in range(period))
        return head
    if period:
        return list(stretch)  # one period: nothing to draw from
    size = max(1, round(math.sqrt(n)))
    out: list[float] = []
    while len(out) < n:
        start = rng.randrange(n - size + 1)
        out.extend(stretch[start : start + size])
    return out[:n]


Stretches = list[list[float]]  # time-ordered stretches of step durations


def bootstrap_interval(
    groups: list[tuple[Stretches, Stretches]], point: float, level: float = 0.95, period: int | None = None
) -> tuple[float, float] | None:
    """The interval of ``rate(fixed) / rate(base)``; ``groups``: ``(base stretches, fixed stretches)``
    measured close together in time (an A/B pair of an alternating trial).

    Two stages, so that both kinds of noise show: the groups are drawn with replacement (what
    differs from one pair of stretches to the next: the machine's neighbours come and go, and a
    pair, run close together, shares its drift, which the pairing cancels), then each stretch of a
    drawn group is block-resampled (noise within it). The percentile interval is widened, where
    it has to be, to hold ``point`` (the pooled ratio of the steps as measured): an interval that
    leaves out its own figure says nothing a reader can use. None when a side has no steps.
    ``period``: see ``_resample``."""
    groups = [(bs, fs) for bs, fs in groups if any(bs) or any(fs)]
    if not any(b for bs, _ in groups for b in bs) or not any(f for _, fs in groups for f in fs):
        return None
    rng = random.Random(BOOT_SEED)
    ratios = []
    for _ in range(BOOT_ROUNDS):
        base: list[float] = []
        fixed: list[float] = []
        for _ in groups:
            bs, fs = groups[rng.randrange(len(groups))]
            for stretch in bs:
                base.extend(_resample(stretch, rng, period))
            for stretch in fs:
                fixed.extend(_resample(stretch, rng, period))
        rb, rf = rate(base), rate(fixed)
        if rb and rf:
            ratios.append(rf / rb)
    if not ratios:
        return None
    ratios.sort()
    tail = (1 - level) / 2
    lo = ratios[int(tail * (len(ratios) - 1))]
    hi = ratios[math.ceil((1 - tail) * (len(ratios) - 1))]
    return (min(lo, point), max(hi, point))


def alternating(
    segments: list[tuple[str, list[float]]], skips: list[int] | None = None, period: int | None = None
) -> Measured:
    """Speed-up from alternating ``A``/``B`` segments of step durations.

    Each segment leaves its first ``skips[i]`` steps out (1 by default: the switch; a rebuilt
    loader's ready batches for a loader stretch). Rates pool every rated step of a kind; the
    interval is the block bootstrap over the pairs of stretches run one after the other (each B
    with the A before it; an A left at the end joins the last pair), see ``bootstrap_interval``.
    ``period``: a cost paid every ``period`` steps, which the resamples keep whole (``_resample``).
    """
    cut = [max(1, k) for k in skips] if skips else [1] * len(segments)
    rated = [(label, d[k:]) for (label, d), k in zip(segments, cut, strict=True) if len(d) - k >= MIN_RATED_STEPS]
    base = rate([x for label, d in rated if label == "A" for x in d])
    fixed = rate([x for label, d in rated if label == "B" for x in d])
    speedup = fixed / base if fixed and base else None
    groups: list[tuple[Stretches, Stretches]] = []
    for label, d in rated:
        if label == "A" and (not groups or groups[-1][1]):
            groups.append(([d], []))
        elif label == "A":
            groups[-1][0].append(d)
        elif groups:
            groups[-1][1].append(d)
        else:
            groups.append(([], [d]))
    if len(groups) > 1 and not groups[-1][1]:  # a closing A: it belongs with the pair before it
        groups[-2][0].extend(groups.pop()[0])
    spread = bootstrap_interval(groups, speedup, period=period) if speedup else None
    return Measured(base, fixed, speedup, spread)
