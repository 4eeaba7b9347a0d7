"""Chrome trace events (open in Perfetto or chrome://tracing): steps with nested phase slices on
the training thread's track, counter tracks for CPU, disk and GPU, and named worker processes.

Phase slices inside a step are laid end to end in a fixed order: hooks give each phase's total
per step, not its exact position, and the trace says so in its metadata.
"""
from __future__ import annotations

import os
from typing import Any

from supplyline.analyze.breakdown import breakdown
from supplyline.record import RunRecord

TRAIN_TID = 1


def build_trace(record: RunRecord) -> dict[str, Any]:
    pid = os.getpid() if record.target.kind == "library" else 1
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"trainer: {record.target.name}"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": TRAIN_TID, "args": {"name": "training thread"}},
    ]
    b = breakdown(record)
    st = record.steps
    kept = set(record.observed_steps)
    idx_pos = {i: k for k, i in enumerate(sorted(kept)[b.warmup_steps_excluded:])}
    for i, (start, dur) in enumerate(zip(st["start_s"], st["duration_s"])):
        ts = start * 1e6
        label = "step" if i in kept else "what-if step (compute-only replay)"
        events.append({"ph": "X", "name": label, "cat": "step", "pid": pid, "tid": TRAIN_TID, "ts": ts,
                       "dur": dur * 1e6, "args": {"index": i, "batches": st["batches"][i]}})
        pos = idx_pos.get(i)
        if pos is None:
            continue
        cursor = ts
        for phase, values in b.per_step_phase_s.items():
            d = values[pos] * 1e6
            if d <= 0:
                continue
            d = min(d, ts + dur * 1e6 - cursor)
            if d <= 0:
                break
            events.append({"ph": "X", "name": phase, "cat": "phase", "pid": pid, "tid": TRAIN_TID, "ts": cursor,
                           "dur": d})
            cursor += d
    events.extend(_counters(record, pid))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "metadata": {"source": "supplyline", "note": "phase slices are per-step totals laid end to end"}}


def _counters(record: RunRecord, pid: int) -> list[dict[str, Any]]:
    mon = record.monitor
    t0 = mon.get("t0_unix_s")
    out: list[dict[str, Any]] = []
    if t0 is None:
        return out
    named: set[int] = set()
    for s in mon.get("samples", []):
        ts = (s["time_unix_s"] - t0) * 1e6
        if ts < 0:
            continue
        out.append({"ph": "C", "name": "CPU busy (%)", "pid": pid, "ts": ts, "args": {"busy": s["cpu"]["busy_pct"]}})
        disk = {d["device"]: d["read_mb_per_s"] for d in s.get("disks", [])}
        if disk:
            out.append({"ph": "C", "name": "disk read (MB/s)", "pid": pid, "ts": ts, "args": disk})
        for g in s.get("gpus", []):
            if g.get("util_pct") is not None:
                out.append({"ph": "C", "name": f"GPU{g['index']} util (%)", "pid": pid, "ts": ts,
                            "args": {"util": g["util_pct"]}})
        for p in s.get("processes", []):
            if p["role"] == "root":
                continue
            wpid = p["pid"]
            if wpid not in named:
                named.add(wpid)
                out.append({"ph": "M", "name": "process_name", "pid": wpid, "tid": 0,
                            "args": {"name": f"DataLoader worker {wpid}"}})
            out.append({"ph": "C", "name": "worker CPU (%)", "pid": wpid, "ts": ts, "args": {"cpu": p["cpu_pct"]}})
    return out
