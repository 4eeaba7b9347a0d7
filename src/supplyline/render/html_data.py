"""The numbers the HTML report plots, derived from a RunRecord: one JSON-able dict.

Times are seconds since the run started (the StepClock's zero and the monitor's ``t0_unix_s``
are taken together), so every time plot shares one axis. Missing pieces (no monitor, no GPU, no
steps) become empty lists plus a note the page shows in place of the plot.
"""

from __future__ import annotations

import math
from typing import Any

from supplyline import phases as P
from supplyline.analyze.breakdown import Breakdown
from supplyline.collect.samples import ProcessSample, Sample
from supplyline.record import RunRecord

GIB = 2**30
MAX_DISKS = 4  # busiest devices only: a host lists loop and partition devices by the dozen


def finite(value: Any) -> Any:
    """JSON has no NaN/Infinity (JSON.parse rejects them): map them, recursively, to null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def plot_data(record: RunRecord, b: Breakdown) -> dict[str, Any]:
    """The plotted series: per-step phases from the report's breakdown, raw series from the record."""
    steps = _steps(record, b)
    monitor = _monitor(record)
    ends = [s + d / 1e3 for s, d in zip(steps["start_s"], steps["duration_ms"])] + monitor["t_s"]
    data: dict[str, Any] = finite(
        {
            "t_end_s": max(ends) if ends else 0.0,
            "phases": P.page_table(),
            "steps": steps,
            "histogram": _histogram(steps),
            "monitor": monitor,
        }
    )
    return data


def _steps(record: RunRecord, b: Breakdown) -> dict[str, Any]:
    st = record.steps
    observed = record.observed_steps
    position = {i: k for k, i in enumerate(observed[b.warmup_steps_excluded :])}
    kinds: list[str] = []
    phases: dict[str, list[float | None]] = {p: [] for p in P.PHASE_ORDER}
    for i in range(len(st.get("duration_s", []))):
        pos = position.get(i)
        kinds.append("observed" if pos is not None else "whatif" if st["whatif"][i] else "warmup")
        for p in P.PHASE_ORDER:
            phases[p].append(b.per_step_phase_s[p][pos] * 1e3 if pos is not None else None)
    return {
        "start_s": list(st.get("start_s", [])),
        "duration_ms": [d * 1e3 for d in st.get("duration_s", [])],
        "kind": kinds,
        "phases_ms": phases,
    }


def _histogram(steps: dict[str, Any], bins: int = 24) -> dict[str, Any]:
    values = [d for d, k in zip(steps["duration_ms"], steps["kind"]) if k == "observed"]
    if not values:
        return {"edges_ms": [], "counts": []}
    lo, hi = min(values), max(values)
    width = (hi - lo) / bins if hi > lo else 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    return {"edges_ms": [lo + width * k for k in range(bins + 1)], "counts": counts}


def _monitor(record: RunRecord) -> dict[str, Any]:
    mon = record.monitor
    samples = mon.samples
    t0 = mon.t0_unix_s
    empty: dict[str, Any] = {
        "t_s": [],
        "cpu_busy": [],
        "cpu_cores": [],
        "trainer_cpu": [],
        "workers": [],
        "memory": {},
        "disks": [],
        "gpus": [],
        "note": None,
    }
    if not samples or t0 is None:
        why = next((n for n in record.notes if "monitor" in n), None)
        empty["note"] = (
            f"no host monitor samples in this record ({why})" if why else "no host monitor samples in this record"
        )
        return empty
    t = [s.time_unix_s - t0 for s in samples]
    n_cores = max(len(s.cpu.per_core_busy_pct) for s in samples)
    cores = [[_at(s.cpu.per_core_busy_pct, c) for s in samples] for c in range(n_cores)]
    return {
        "t_s": t,
        "cpu_busy": [s.cpu.busy_pct for s in samples],
        "cpu_cores": cores,
        "trainer_cpu": [_root_cpu(s) for s in samples],
        "workers": _workers(samples),
        "memory": {
            "used_gib": [s.memory.used_bytes / GIB for s in samples],
            "page_cache_gib": [s.memory.page_cache_bytes / GIB for s in samples],
            "rss_gib": [sum(p.rss_bytes for p in s.processes) / GIB for s in samples],
            "total_gib": samples[-1].memory.total_bytes / GIB,
        },
        "disks": _disks(samples),
        "gpus": _gpus(samples),
        "note": mon.gpu_note,
    }


def _at(values: list[float], k: int) -> float | None:
    return values[k] if k < len(values) else None


def _root_cpu(sample: Sample) -> float | None:
    return next((p.cpu_pct for p in sample.processes if p.role == "root"), None)


def _process(sample: Sample, pid: int) -> ProcessSample | None:
    return next((p for p in sample.processes if p.pid == pid), None)


def _workers(samples: list[Sample]) -> list[dict[str, Any]]:
    """One CPU series per child process (DataLoader workers), null where the process did not exist."""
    pids: dict[int, str] = {}
    for s in samples:
        for p in s.processes:
            if p.role != "root":
                pids.setdefault(p.pid, p.name or "")
    out = []
    for pid, name in pids.items():
        series = [(proc.cpu_pct if (proc := _process(s, pid)) else None) for s in samples]
        out.append({"pid": pid, "name": name, "cpu": series})
    return out


def _disks(samples: list[Sample]) -> list[dict[str, Any]]:
    names: dict[str, float] = {}
    for s in samples:
        for d in s.disks:
            names[d.device] = names.get(d.device, 0.0) + d.read_mb_per_s + d.write_mb_per_s + d.util_pct
    # Busiest devices only, idle ones say nothing.
    busiest = sorted((n for n in names if names[n] > 0), key=lambda n: -names[n])[:MAX_DISKS]
    out = []
    for dev in busiest:
        rows = [next((d for d in s.disks if d.device == dev), None) for s in samples]
        out.append(
            {
                "device": dev,
                "read_mb_per_s": [r.read_mb_per_s if r else None for r in rows],
                "write_mb_per_s": [r.write_mb_per_s if r else None for r in rows],
                "util_pct": [r.util_pct if r else None for r in rows],
            }
        )
    return out


def _gpus(samples: list[Sample]) -> list[dict[str, Any]]:
    indices: dict[int, str] = {}
    for s in samples:
        for g in s.gpus:
            indices.setdefault(g.index, g.name or "")
    out = []
    for idx, name in sorted(indices.items()):
        util = [next((g.util_pct for g in s.gpus if g.index == idx), None) for s in samples]
        if any(u is not None for u in util):
            out.append({"index": idx, "name": name, "util_pct": util})
    return out
