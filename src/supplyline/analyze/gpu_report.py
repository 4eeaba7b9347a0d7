"""The report's GPU idle section: the record's CUDA marks attributed to host phases, beside NVML.

``gpu_idle_result`` runs the pure attribution (``analyze.gpu_idle``) over the observed steps the
breakdown kept: what-if replay steps are left out, and the warm-up step's GPU work still counts as
busy (a CPU that ran ahead has it running inside the next steps). ``gpu_idle_section`` turns the
result into the typed section of the Report; both are None on records without measured marks
(CPU machines, records written before the field existed), so those reports stay as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from supplyline import phases as P
from supplyline.analyze.breakdown import Breakdown, observed_indices
from supplyline.analyze.gpu_idle import GpuIdleResult, attribute_gpu_idle, gpu_side
from supplyline.analyze.gpu_util import gpu_util_timeline, util_series
from supplyline.record import RunRecord


@dataclass
class GpuIdleSection:
    """How long the GPU itself waited for the host (two CUDA events per step), by host cause."""

    idle_share: float | None  # GPU idle time / wall time of the measured steps
    idle_ms_per_step: float | None
    steps_measured: int
    steps_pending: int  # left out: their CUDA events had not completed
    by_phase_share: dict[str, float]  # GPU idle split over the host phase running meanwhile, share of wall time
    host_phase_share: dict[str, float]  # the CPU side over the same steps: what the training thread waited on
    cpu_ahead_ms: float | None  # median: how long after the host queued a step's last work the GPU finished it
    gpu_bound: P.Bound | str  # the side the GPU waited for most ("compute" when it was kept busy)
    sync_lines: dict[str, float]  # GPU idle seconds after a sync at "file:line"
    step_index: list[int]  # the measured steps (indices into the record's step columns)
    per_step_idle_ms: list[float]  # per measured step, in step order
    per_step_util_pct: list[float | None]  # NVML, overlap-weighted per measured step (coarse: 1 s samples)
    util_mean_pct: float | None
    util_sawtooth: bool | None  # the periodic-drop detector on NVML utilization (None: too few samples)
    util_period_s: float | None
    device: int | None
    note: str


def gpu_idle_result(record: RunRecord, b: Breakdown) -> GpuIdleResult | None:
    tl = record.gpu_timeline
    if tl is None or not tl.available or not tl.marks:
        return None
    idx, _ = observed_indices(record)
    if not idx:
        return None
    first, last = idx[0], idx[-1]
    # Marks up to the last kept step; the excluded warm-up before it is busy but not reported.
    marks = [m for m in tl.marks if m.step <= last]
    warm = sum(1 for m in marks if m.step < first)
    return attribute_gpu_idle(marks, tl.intervals, tl.syncs, warmup_steps=warm)


def gpu_idle_section(record: RunRecord, result: GpuIdleResult | None) -> GpuIdleSection | None:
    tl = record.gpu_timeline
    if result is None or tl is None:
        return None
    wall = result.wall_s
    n = len(result.steps)
    windows = _windows(record, {s.step for s in result.steps})
    t0 = record.monitor.t0_unix_s
    points = util_series(_samples(record), tl.device or 0, t0) if t0 is not None else []
    util = gpu_util_timeline(windows, points, record.monitor.interval_s)
    osc = util.oscillation
    notes = [x for x in (tl.note, result.note, util.note if util.samples else "") if x]
    return GpuIdleSection(
        idle_share=result.idle_share,
        idle_ms_per_step=result.idle_s / n * 1e3 if n else None,
        steps_measured=n,
        steps_pending=result.steps_pending + tl.steps_pending,
        by_phase_share={k: v / wall for k, v in result.by_phase.items()} if wall > 0 else {},
        host_phase_share={k: v / wall for k, v in result.host_phase_s.items()} if wall > 0 else {},
        cpu_ahead_ms=None if result.cpu_ahead_s_median is None else result.cpu_ahead_s_median * 1e3,
        gpu_bound=gpu_side(result),
        sync_lines=result.sync_lines,
        step_index=[s.step for s in result.steps],
        per_step_idle_ms=[s.idle_s * 1e3 for s in result.steps],
        per_step_util_pct=util.per_step_pct,
        util_mean_pct=util.mean_pct,
        util_sawtooth=None if osc is None else osc.oscillates,
        util_period_s=None if osc is None else osc.period_s,
        device=tl.device,
        note="; ".join(notes),
    )


def _windows(record: RunRecord, steps: set[int]) -> list[tuple[float, float]]:
    st = record.steps
    return [(st["start_s"][i], st["start_s"][i] + st["duration_s"][i]) for i in sorted(steps)]


def _samples(record: RunRecord) -> list[dict[str, Any]]:
    """The monitor's samples in the plain shape ``util_series`` reads."""
    return [
        {"time_unix_s": s.time_unix_s, "gpus": [{"index": g.index, "util_pct": g.util_pct} for g in s.gpus]}
        for s in record.monitor.samples
    ]
