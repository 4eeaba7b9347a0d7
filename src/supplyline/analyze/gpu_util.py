"""NVML's GPU utilization beside the step timeline: per-step utilization and the periodic drop.

NVML's "utilization" is the share of its last sampling window (between 1/6 s and 1 s, by device)
in which any kernel ran, so a sample taken at ``t`` speaks for ``[t - window_s, t]``. A step's
utilization is the mean of the samples whose windows overlap it, weighted by the overlap. With
a monitor sampling every second and steps of milliseconds, neighbouring steps share one value:
the per-step figure is coarse, the CUDA events (``analyze.gpu_idle``) are the fine one.
The saw-tooth "100% -> 0% -> 100%" is judged by the monitor's periodic-drop detector.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from supplyline.analyze.oscillation import OscillationResult, detect_oscillation

UtilPoint = tuple[float, float]  # (seconds on the step clock, utilization %)


@dataclass(frozen=True)
class GpuUtilTimeline:
    per_step_pct: list[float | None]  # one per step window; None where no sample overlaps it
    mean_pct: float | None  # over the samples inside the steps' span
    oscillation: OscillationResult | None  # None with fewer than two samples
    samples: int
    note: str


def util_series(samples: Sequence[dict[str, Any]], device_index: int, t0_unix_s: float) -> list[UtilPoint]:
    """One device's utilization from the monitor's sample dicts, on the step clock (seconds since
    ``t0_unix_s``, the wall time at which the step clock started). Unreported values are dropped."""
    out = []
    for s in samples:
        for g in s.get("gpus") or []:
            if g.get("index") == device_index and g.get("util_pct") is not None:
                out.append((float(s["time_unix_s"]) - t0_unix_s, float(g["util_pct"])))
    return out


def per_step_utilization(
    windows: Sequence[tuple[float, float]], points: Sequence[UtilPoint], window_s: float
) -> list[float | None]:
    """Overlap-weighted mean utilization per step window ``(start_s, end_s)``."""
    ordered = sorted(points)
    out: list[float | None] = []
    for start, end in windows:
        weight = total = 0.0
        for t, util in ordered:
            if t - window_s >= end:
                break
            overlap = min(end, t) - max(start, t - window_s)
            if overlap > 0:
                weight += overlap
                total += overlap * util
            elif end == start and t - window_s <= start <= t:  # a zero-length window takes the sample
                weight, total = 1.0, util
        out.append(total / weight if weight > 0 else None)
    return out


def gpu_util_timeline(
    windows: Sequence[tuple[float, float]], points: Sequence[UtilPoint], window_s: float = 1.0
) -> GpuUtilTimeline:
    """Per-step utilization and the periodic-drop verdict of one device's NVML samples."""
    if not points:
        return GpuUtilTimeline([None] * len(windows), None, None, 0, "no GPU utilization samples")
    ordered = sorted(points)
    lo = windows[0][0] if windows else ordered[0][0]
    hi = windows[-1][1] if windows else ordered[-1][0]
    inside = [u for t, u in ordered if lo <= t <= hi + window_s]
    osc = detect_oscillation([u for _, u in ordered], timestamps=[t for t, _ in ordered]) if len(ordered) >= 2 else None
    note = "" if len(inside) >= 5 else f"only {len(inside)} utilization sample(s) during the steps: a rough figure"
    return GpuUtilTimeline(
        per_step_utilization(windows, ordered, window_s),
        sum(inside) / len(inside) if inside else None,
        osc,
        len(ordered),
        note,
    )
