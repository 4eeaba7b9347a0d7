"""Where the observed steps' time went: phase totals and shares, step-time statistics, top lines.

Pure functions of a RunRecord. Hooks measure data wait, transfer, logging, checkpoint and the
backward/optimizer part of compute directly; the rest of each step ("unhooked") is split by the
stack sampler's samples: inside torch's module/autograd/optimizer code = compute, on a line of the
user's code that writes or prints = logging, anywhere else in the user's code = other.
"""

from __future__ import annotations

import linecache
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from supplyline.record import RunRecord

PHASE_ORDER = ("data_wait", "transfer", "compute", "collective", "logging", "checkpoint", "other")
_IO_LINE = re.compile(r"\.write\(|\.flush\(|fsync\(|fdatasync\(|print\(|\.writelines\(|logging\.|logger\.")


@dataclass
class Breakdown:
    steps: int
    warmup_steps_excluded: int
    total_s: float
    step_s_median: float
    step_s_mean: float
    step_s_p95: float
    steps_per_s: float
    samples_per_s: float | None
    batches_per_step: float
    phase_s: dict[str, float]
    phase_share: dict[str, float]
    per_step_phase_s: dict[str, list[float]]
    top_lines: list[dict[str, Any]] = field(default_factory=list)
    data_wait_lines: list[dict[str, Any]] = field(default_factory=list)
    phase_lines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def source_line(file: str, line: int) -> str:
    return linecache.getline(file, line).strip()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def observed_indices(record: RunRecord) -> tuple[list[int], int]:
    """Observed steps, without the first one when there are enough (it carries worker start-up)."""
    idx = record.observed_steps
    warm = 1 if len(idx) >= 5 else 0
    return idx[warm:], warm


def unhooked_split(record: RunRecord) -> dict[str, float]:
    """Fractions of unhooked time that are compute, logging and other, from the stack samples."""
    counts = {"compute": 0, "logging": 0, "other": 0}
    for s in record.line_samples:
        if s["phase"] != "unhooked":
            continue
        counts[_classify(s)] += s["samples"]
    total = sum(counts.values())
    if total == 0:
        return {"compute": 1.0, "logging": 0.0, "other": 0.0}
    return {k: v / total for k, v in counts.items()}


def _classify(sample: dict[str, Any]) -> str:
    if sample["category"] == "torch":
        return "compute"
    if _IO_LINE.search(source_line(sample["file"], sample["line"])):
        return "logging"
    return "other"


def breakdown(record: RunRecord) -> Breakdown:
    idx, warm = observed_indices(record)
    st = record.steps
    split = unhooked_split(record)
    per_step: dict[str, list[float]] = {p: [] for p in PHASE_ORDER}
    no_collectives = [0.0] * len(st["duration_s"])  # records written before the collective phase existed
    collective = st.get("collective_s") or no_collectives
    for i in idx:
        hooked = {p: st[f"{p}_s"][i] for p in ("data_wait", "transfer", "logging", "checkpoint")}
        hooked["collective"] = collective[i]
        compute_hooked = st["compute_hooked_s"][i]
        rest = max(0.0, st["duration_s"][i] - sum(hooked.values()) - compute_hooked)
        per_step["data_wait"].append(hooked["data_wait"])
        per_step["transfer"].append(hooked["transfer"])
        per_step["logging"].append(hooked["logging"] + rest * split["logging"])
        per_step["checkpoint"].append(hooked["checkpoint"])
        per_step["collective"].append(hooked["collective"])
        per_step["compute"].append(compute_hooked + rest * split["compute"])
        per_step["other"].append(rest * split["other"])
    durations = [st["duration_s"][i] for i in idx]
    total = sum(durations)
    phase_s = {p: sum(v) for p, v in per_step.items()}
    share = {p: (v / total if total > 0 else 0.0) for p, v in phase_s.items()}
    batches = [st["batches"][i] for i in idx]
    batch_size = train_batch_size(record)
    mean_batches = statistics.mean(batches) if batches else 0.0
    step_median = statistics.median(durations) if durations else 0.0
    steps_per_s = len(durations) / total if total > 0 else 0.0
    samples_per_s = steps_per_s * mean_batches * batch_size if batch_size and mean_batches else None
    b = Breakdown(
        steps=len(idx),
        warmup_steps_excluded=warm,
        total_s=total,
        step_s_median=step_median,
        step_s_mean=(total / len(durations) if durations else 0.0),
        step_s_p95=_percentile(durations, 0.95),
        steps_per_s=steps_per_s,
        samples_per_s=samples_per_s,
        batches_per_step=mean_batches,
        phase_s=phase_s,
        phase_share=share,
        per_step_phase_s=per_step,
    )
    _attach_lines(record, b)
    return b


def train_batch_size(record: RunRecord) -> int | None:
    for loader in record.loaders:
        if loader["role"] == "train":
            return loader["batch_size"]
    return None


def _attach_lines(record: RunRecord, b: Breakdown) -> None:
    """Top source lines per phase, each with its share of observed step time."""
    in_steps = sum(s["samples"] for s in record.line_samples)
    if in_steps == 0:
        return
    by_phase: dict[str, list[dict[str, Any]]] = {}
    for s in record.line_samples:
        kind = _classify(s) if s["phase"] == "unhooked" else s["phase"]
        entry = {
            "file": s["file"],
            "line": s["line"],
            "function": s["function"],
            "phase": kind,
            "code": source_line(s["file"], s["line"]),
            "share_of_step_time": s["samples"] / in_steps,
        }
        by_phase.setdefault(kind, []).append(entry)
    for entries in by_phase.values():
        entries.sort(key=lambda e: -e["share_of_step_time"])
    b.phase_lines = {k: v[:5] for k, v in by_phase.items()}
    b.top_lines = [
        e
        for e in sorted(
            (e for k in ("other", "logging") for e in by_phase.get(k, [])), key=lambda e: -e["share_of_step_time"]
        )
    ][:8]
    b.data_wait_lines = by_phase.get("data_wait", [])[:5]
