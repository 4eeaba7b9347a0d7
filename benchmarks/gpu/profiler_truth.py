"""The truth for the GPU-idle checks: GPU idle share from torch.profiler's CUDA timeline.

GPU idle share = 1 - |union of kernel, memcpy and memset intervals| / wall time of the observed
window, where the window runs from the start of the first kept step annotation to the end of the
last (the host's steps; Kineto puts GPU activity on the same clock).
"""

from __future__ import annotations

from typing import Any

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def idle_share_from_trace(trace: dict[str, Any], step_name: str, skip_first: int = 0) -> dict[str, Any]:
    """Parse a chrome trace (``prof.export_chrome_trace``); times in the trace are microseconds."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    steps = sorted(
        (e for e in events if e.get("name") == step_name and e.get("cat") == "user_annotation"),
        key=lambda e: float(e["ts"]),
    )[skip_first:]
    if not steps:
        return {"idle_share": None, "note": f"no '{step_name}' annotations in the trace", "gpu_events": 0}
    lo = float(steps[0]["ts"])
    hi = max(float(e["ts"]) + float(e.get("dur", 0)) for e in steps)
    busy = sorted(
        (max(lo, float(e["ts"])), min(hi, float(e["ts"]) + float(e.get("dur", 0))))
        for e in events
        if e.get("cat") in GPU_CATEGORIES
    )
    covered = _union_length([(a, b) for a, b in busy if b > a])
    wall = hi - lo
    return {
        "idle_share": 1.0 - covered / wall if wall > 0 else None,
        "wall_ms": wall / 1000.0,
        "gpu_busy_ms": covered / 1000.0,
        "steps": len(steps),
        "gpu_events": sum(1 for e in events if e.get("cat") in GPU_CATEGORIES),
        "note": "" if busy else "no GPU activity in the trace (a CPU run, or no CUDA activity recorded)",
    }


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in intervals:  # sorted by start
        if a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total
