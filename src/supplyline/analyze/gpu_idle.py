"""How long the GPU itself waited for the host, per step and per host-side cause.

CUDA runs asynchronously: while the training thread waits for the next batch, kernels it queued
earlier may still be running, and the GPU is not idle at all. So the CPU-side wait is not the
GPU's wait. Two CUDA events per step give the GPU's side:

- ``first_work_s``: when the GPU reached the step's first queued work (an event recorded just
  before it, once the batch has arrived), and
- ``work_done_s``: when the GPU finished the step's last queued work (an event recorded after the
  step's last launch, the optimizer update).

Between the two, the GPU is taken as busy; everything else inside the steps' wall windows is GPU
idle. Each idle stretch is split over the training thread's host phases that ran during it (data
wait, transfer, logging, checkpoint, ...): those are what the GPU waited for. Idle time covered
by no hooked phase is "other", or "sync" when the GPU ran dry while the host sat in a
synchronizing call at a known line (the host had lost its lead there, so its next work was exposed).

All times are seconds on one host clock; ``ClockAlignment`` converts CUDA event times to it.
Everything here is pure: tests build timelines by hand.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

# The collected timestamps live with the other collect records (no torch needed to load them).
from supplyline import phases as P
from supplyline.collect.events import ClockAlignment, HostInterval, StepGpuMarks, SyncPoint

__all__ = ["ClockAlignment", "HostInterval", "StepGpuMarks", "SyncPoint", "attribute_gpu_idle", "gpu_side"]

OTHER = P.OTHER
SYNC = "sync"


@dataclass(frozen=True)
class StepGpuIdle:
    step: int
    idle_s: float  # GPU idle time inside this step's wall window
    by_phase: dict[str, float]  # the same, split over the host phases running meanwhile
    dry_phase: str | None  # host phase running when the GPU ran out of this step's work
    sync_line: str | None  # set when it ran dry while the host waited in a sync at this line
    cpu_ahead_s: float | None  # how long after the host queued the step's last work the GPU finished it


@dataclass(frozen=True)
class GpuIdleResult:
    steps: list[StepGpuIdle]
    idle_s: float
    wall_s: float  # summed wall windows of the measured steps
    idle_share: float | None  # idle_s / wall_s; None when no step could be measured
    by_phase: dict[str, float]
    host_phase_s: dict[str, float]  # the CPU side over the same steps: what the training thread waited on
    cpu_ahead_s_median: float | None  # the "CPU ran ahead by N ms" figure
    steps_pending: int  # steps left out because their events had not completed
    note: str = ""
    sync_lines: dict[str, float] = field(default_factory=dict)  # idle seconds per sync line


def attribute_gpu_idle(
    marks: Sequence[StepGpuMarks],
    intervals: Sequence[HostInterval] = (),
    syncs: Sequence[SyncPoint] = (),
    warmup_steps: int = 0,
) -> GpuIdleResult:
    """GPU idle per step and per host phase. ``marks`` in step order; ``intervals`` and ``syncs``
    in any order (non-overlapping intervals: the training thread is in one outer phase at a time).

    The first ``warmup_steps`` marks are not reported, but their GPU work still counts as busy:
    a job whose CPU runs ahead has the warm-up's kernels running inside the next steps' windows."""
    ivs = sorted((i for i in intervals if i.end_s > i.start_s), key=lambda i: i.start_s)
    sync_pts = sorted(syncs, key=lambda s: s.t_s)
    busy = _busy_runs(marks)
    out: list[StepGpuIdle] = []
    pending = 0
    for m in marks[warmup_steps:]:
        if m.first_work_s is None or m.work_done_s is None:
            pending += 1
            continue
        out.append(_one_step(m, busy, ivs, sync_pts))
    return _totals(out, marks[warmup_steps:], ivs, pending)


def _busy_runs(marks: Sequence[StepGpuMarks]) -> list[tuple[float, float]]:
    """The GPU's busy stretches, one per step; a step whose events are pending is busy to the end
    (its work was queued: we cannot call any of it idle)."""
    runs = []
    for m in marks:
        if m.first_work_s is None:
            continue
        start = m.first_work_s
        end = _done(m) if m.work_done_s is not None else float("inf")
        runs.append((start, max(start, end)))
    return runs


def _done(m: StepGpuMarks) -> float:
    # The GPU cannot finish work before the host queued it: a GPU time earlier than that is
    # calibration error and is clamped.
    assert m.work_done_s is not None
    return m.work_done_s if m.work_queued_s is None else max(m.work_done_s, m.work_queued_s)


def _one_step(
    m: StepGpuMarks, busy: list[tuple[float, float]], ivs: list[HostInterval], syncs: list[SyncPoint]
) -> StepGpuIdle:
    idle_pieces = _subtract([(m.start_s, m.end_s)], busy)
    done = _done(m)
    dry_phase = _phase_at(ivs, done) if m.start_s <= done <= m.end_s else None
    sync_line = _sync_before(ivs, syncs, done) if dry_phase == OTHER else None
    by_phase: dict[str, float] = {}
    for a, b in idle_pieces:
        for phase, seconds in _split(a, b, ivs).items():
            if phase == OTHER and sync_line is not None and a >= done:
                phase = SYNC
            by_phase[phase] = by_phase.get(phase, 0.0) + seconds
    ahead = None if m.work_queued_s is None else max(0.0, done - m.work_queued_s)
    return StepGpuIdle(m.step, sum(b - a for a, b in idle_pieces), by_phase, dry_phase, sync_line, ahead)


def _subtract(pieces: list[tuple[float, float]], runs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``pieces`` (one window) minus the union of ``runs``. Runs come in stream order, so their
    starts and ends both ascend: bisect to the few that can touch the window."""
    lo_t, hi_t = pieces[0][0], pieces[-1][1]
    first = bisect_right(runs, lo_t, key=lambda r: r[1])
    last = bisect_left(runs, hi_t, key=lambda r: r[0])
    for ra, rb in runs[first:last]:
        nxt = []
        for a, b in pieces:
            if rb <= a or ra >= b:
                nxt.append((a, b))
                continue
            if ra > a:
                nxt.append((a, ra))
            if rb < b:
                nxt.append((rb, b))
        pieces = nxt
    return pieces


def _split(a: float, b: float, ivs: list[HostInterval]) -> dict[str, float]:
    """Seconds of [a, b) under each host phase; the uncovered rest is "other"."""
    out: dict[str, float] = {}
    covered = 0.0
    for iv in ivs[bisect_right(ivs, a, key=lambda i: i.end_s) :]:  # intervals do not overlap: ends ascend
        if iv.start_s >= b:
            break
        lo, hi = max(a, iv.start_s), min(b, iv.end_s)
        if hi > lo:
            out[iv.phase] = out.get(iv.phase, 0.0) + hi - lo
            covered += hi - lo
    if b - a - covered > 1e-12:
        out[OTHER] = out.get(OTHER, 0.0) + (b - a - covered)
    return out


def _phase_at(ivs: list[HostInterval], t: float) -> str:
    i = bisect_right(ivs, t, key=lambda iv: iv.end_s)
    if i < len(ivs) and ivs[i].start_s <= t:
        return ivs[i].phase
    return OTHER


def _sync_before(ivs: list[HostInterval], syncs: list[SyncPoint], t: float) -> str | None:
    """The line of the sync the host sat in when the GPU ran dry at ``t``: the last sync call
    before ``t`` with no hooked phase after it (a host still waiting in a sync does nothing else)."""
    i = bisect_right(syncs, t, key=lambda p: p.t_s)
    if i == 0:
        return None
    last = syncs[i - 1]
    j = bisect_right(ivs, last.t_s, key=lambda iv: iv.start_s)
    if j < len(ivs) and ivs[j].start_s <= t:
        return None
    return last.line


def _totals(
    steps: list[StepGpuIdle], marks: Sequence[StepGpuMarks], ivs: list[HostInterval], pending: int
) -> GpuIdleResult:
    measured = {s.step for s in steps}
    windows = [(m.start_s, m.end_s) for m in marks if m.step in measured]
    wall = sum(b - a for a, b in windows)
    idle = sum(s.idle_s for s in steps)
    by_phase: dict[str, float] = {}
    sync_lines: dict[str, float] = {}
    for s in steps:
        for phase, seconds in s.by_phase.items():
            by_phase[phase] = by_phase.get(phase, 0.0) + seconds
        if s.sync_line is not None:
            sync_lines[s.sync_line] = sync_lines.get(s.sync_line, 0.0) + s.by_phase.get(SYNC, 0.0)
    host: dict[str, float] = {}
    for a, b in windows:
        for phase, seconds in _split(a, b, ivs).items():
            host[phase] = host.get(phase, 0.0) + seconds
    aheads = [s.cpu_ahead_s for s in steps if s.cpu_ahead_s is not None]
    note = ""
    if not steps:
        note = "no step had both CUDA events complete" if marks else "no steps with CUDA events"
    elif pending:
        note = f"{pending} step(s) left out: their CUDA events had not completed"
    return GpuIdleResult(
        steps=steps,
        idle_s=idle,
        wall_s=wall,
        idle_share=idle / wall if wall > 0 else None,
        by_phase=by_phase,
        host_phase_s=host,
        cpu_ahead_s_median=statistics.median(aheads) if aheads else None,
        steps_pending=pending,
        note=note,
        sync_lines=sync_lines,
    )


# The host phases whose GPU idle time blames a side of the supply line (collectives are not host-side).
SIDES: dict[str, str | None] = {p.name: p.bound for p in P.SUPPLY_SIDE if p.name != P.COLLECTIVE}


def gpu_side(result: GpuIdleResult, threshold: float = 0.20) -> str:
    """The bottleneck as the GPU saw it: the host side whose GPU idle share is largest, when it
    reaches ``threshold`` of wall time; "compute" when the GPU was kept busy; "unknown" unmeasured."""
    if result.idle_share is None or result.wall_s <= 0:
        return "unknown"
    shares: dict[str, float] = {}
    for phase, seconds in result.by_phase.items():
        side = SIDES.get(phase)
        if side is not None:
            shares[side] = shares.get(side, 0.0) + seconds / result.wall_s
    if shares:
        side, share = max(shares.items(), key=lambda kv: kv[1])
        if share >= threshold:
            return side
    return P.COMPUTE
