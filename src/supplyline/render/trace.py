"""Chrome trace events (open in Perfetto or chrome://tracing): steps with nested phase slices on
the training thread's track, counter tracks for CPU, memory, disk and GPU, and named worker processes.

Phase slices inside a step are laid end to end in a fixed order: hooks give each phase's total
per step, not its exact position, and the trace says so in its metadata. Times are whole
microseconds since the run started: integer arithmetic keeps a slice's end exactly within its
parent's (float sums can pass it by an ulp, and viewers then un-nest the slice).
"""

from __future__ import annotations

import os
from typing import Any

from supplyline.analyze.breakdown import Breakdown
from supplyline.analyze.gpu_report import GpuIdleSection
from supplyline.record import RunRecord

TRAIN_TID = 1
GPU_TID = 2
GIB = 2**30


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def trainer_pid(record: RunRecord) -> int:
    """The watched process's real pid when the monitor saw it (keeps worker pids distinct), else a stand-in."""
    for s in record.monitor.samples:
        for p in s.processes:
            if p.role == "root":
                return p.pid
    return os.getpid() if record.target.kind == "library" else 1


def build_trace(record: RunRecord, b: Breakdown, gpu: GpuIdleSection | None = None) -> dict[str, Any]:
    """The trace of the run: raw steps and samples from the record, phase splits from the report's
    breakdown, and on CUDA the GPU's busy stretches (CUDA events) with the report's idle per step."""
    pid = trainer_pid(record)
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"trainer: {record.target.name}"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": 0}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": TRAIN_TID, "args": {"name": "training thread"}},
    ]
    events.extend(_steps(record, b, pid))
    events.extend(_counters(record, pid))
    events.extend(_gpu_track(record, gpu, pid))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "metadata": {"source": "supplyline", "note": "phase slices are per-step totals laid end to end"},
    }


def _steps(record: RunRecord, b: Breakdown, pid: int) -> list[dict[str, Any]]:
    st = record.steps
    observed = record.observed_steps
    kept = set(observed)
    idx_pos = {i: k for k, i in enumerate(observed[b.warmup_steps_excluded :])}
    out: list[dict[str, Any]] = []
    for i, (start, dur) in enumerate(zip(st["start_s"], st["duration_s"])):
        ts, end = _us(start), _us(start + dur)
        pos = idx_pos.get(i)
        label = "step" if pos is not None else "warm-up step" if i in kept else "what-if step (compute-only replay)"
        out.append(
            {
                "ph": "X",
                "name": label,
                "cat": "step",
                "pid": pid,
                "tid": TRAIN_TID,
                "ts": ts,
                "dur": end - ts,
                "args": {"index": i, "batches": st["batches"][i]},
            }
        )
        if pos is None:
            continue
        cursor = ts
        for phase, values in b.per_step_phase_s.items():
            d = min(_us(values[pos]), end - cursor)
            if d <= 0:
                continue
            out.append(
                {
                    "ph": "X",
                    "name": phase,
                    "cat": "phase",
                    "pid": pid,
                    "tid": TRAIN_TID,
                    "ts": cursor,
                    "dur": d,
                    "args": {"ms": round(values[pos] * 1e3, 3)},
                }
            )
            cursor += d
    return out


def _gpu_track(record: RunRecord, gpu: GpuIdleSection | None, pid: int) -> list[dict[str, Any]]:
    """Each measured step's GPU work (first work reached .. last work done) on its own track, and
    the GPU idle time per step as a counter. Unlike the phase slices these are real positions."""
    tl = record.gpu_timeline
    if gpu is None or tl is None:
        return []
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": GPU_TID, "args": {"name": "GPU (CUDA events)"}}
    ]
    measured = set(gpu.step_index)
    for m in tl.marks:
        if m.step not in measured or m.first_work_s is None or m.work_done_s is None:
            continue
        ts = _us(m.first_work_s)
        out.append(
            {
                "ph": "X",
                "name": "GPU work",
                "cat": "gpu",
                "pid": pid,
                "tid": GPU_TID,
                "ts": ts,
                "dur": max(0, _us(m.work_done_s) - ts),
                "args": {"step": m.step},
            }
        )
    st = record.steps
    for i, idle_ms in zip(gpu.step_index, gpu.per_step_idle_ms):
        out.append(_counter("GPU idle (ms per step)", pid, _us(st["start_s"][i]), {"idle": idle_ms}))
    return out


def _counter(name: str, pid: int, ts: float, args: dict[str, Any]) -> dict[str, Any]:
    """A counter event; a value the monitor could not read (None) is left out, not drawn as 0."""
    return {
        "ph": "C",
        "name": name,
        "pid": pid,
        "ts": ts,
        "args": {k: float(v) for k, v in args.items() if v is not None},
    }


def _counters(record: RunRecord, pid: int) -> list[dict[str, Any]]:
    mon = record.monitor
    t0 = mon.t0_unix_s
    out: list[dict[str, Any]] = []
    if t0 is None:
        return out
    named: set[int] = set()
    for s in mon.samples:
        ts = _us(s.time_unix_s - t0)
        if ts < 0:
            continue
        cpu = s.cpu
        out.append(_counter("CPU busy (%)", pid, ts, {"all cores": cpu.busy_pct}))
        cores = {f"core{k}": v for k, v in enumerate(cpu.per_core_busy_pct)}
        if cores:
            out.append(_counter("CPU per core (%)", pid, ts, cores))
        memory = {"used": s.memory.used_bytes / GIB, "page cache": s.memory.page_cache_bytes / GIB}
        out.append(_counter("memory (GiB)", pid, ts, memory))
        for d in s.disks:
            rates = {"read": d.read_mb_per_s, "write": d.write_mb_per_s}
            out.append(_counter(f"disk {d.device} (MB/s)", pid, ts, rates))
            out.append(_counter(f"disk {d.device} util (%)", pid, ts, {"util": d.util_pct}))
        for g in s.gpus:
            if g.util_pct is not None:
                out.append(_counter(f"GPU{g.index} util (%)", pid, ts, {"util": g.util_pct}))
        for p in s.processes:
            if p.role != "root" and p.pid not in named:
                named.add(p.pid)
                out.extend(_worker_names(p.pid, len(named)))
            out.append(_counter("CPU (% of a core)", p.pid, ts, {"cpu": p.cpu_pct}))
    return out


def _worker_names(pid: int, sort_index: int) -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"DataLoader worker {pid}"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort_index}},
    ]
