"""Summary of a monitor series: mean, 95th percentile and maximum of every metric."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from supplyline.collect.samples import Sample, flatten

# Longest suffix first: the unit a metric name ends in.
_UNITS = [
    ("_bytes_per_s", "B/s"),
    ("_mb_per_s", "MB/s"),
    ("_bytes", "B"),
    ("_pct", "%"),
    ("_ms", "ms"),
    ("_mhz", "MHz"),
    ("_w", "W"),
    ("_c", "°C"),
    ("_per_s", "/s"),
]


def unit_of(metric: str) -> str:
    """The unit a metric's name carries (``disk.vda.read_mb_per_s`` -> ``MB/s``); '' when none."""
    for suffix, unit in _UNITS:
        if metric.endswith(suffix):
            return unit
    return ""


@dataclass(frozen=True)
class MetricStats:
    name: str
    unit: str
    mean: float
    p95: float  # linear interpolation between closest ranks, as numpy.percentile's default
    max: float
    count: int  # samples that had a value for this metric


@dataclass
class Summary:
    sample_count: int
    duration_s: float  # first to last sample
    metrics: dict[str, MetricStats] = field(default_factory=dict)

    def __getitem__(self, name: str) -> MetricStats:
        return self.metrics[name]

    def get(self, name: str) -> MetricStats | None:
        return self.metrics.get(name)

    def to_dict(self) -> dict[str, object]:
        return {
            "sample_count": self.sample_count,
            "duration_s": self.duration_s,
            "metrics": {
                k: {"unit": m.unit, "mean": m.mean, "p95": m.p95, "max": m.max, "count": m.count}
                for k, m in self.metrics.items()
            },
        }


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(samples: Sequence[Sample], per_process: bool = True) -> Summary:
    """Statistics of every metric over ``samples``; metrics keep the order they first appear in."""
    series: dict[str, list[float]] = {}
    for sample in samples:
        for name, value in flatten(sample, per_process=per_process).items():
            if value is not None:
                series.setdefault(name, []).append(float(value))
    duration = samples[-1].elapsed_s - samples[0].elapsed_s if len(samples) > 1 else 0.0
    summary = Summary(sample_count=len(samples), duration_s=duration)
    for name, values in series.items():
        summary.metrics[name] = MetricStats(
            name=name,
            unit=unit_of(name),
            mean=sum(values) / len(values),
            p95=percentile(values, 95),
            max=max(values),
            count=len(values),
        )
    return summary


def metric_series(samples: Sequence[Sample], name: str) -> tuple[list[float], list[float]]:
    """Timestamps (``elapsed_s``) and values of one flattened metric, skipping samples without it."""
    times: list[float] = []
    values: list[float] = []
    for sample in samples:
        value = flatten(sample, per_process=name.startswith("proc.")).get(name)
        if value is not None:
            times.append(sample.elapsed_s)
            values.append(float(value))
    return times, values
