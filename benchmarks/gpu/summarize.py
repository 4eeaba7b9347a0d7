"""Collect the GPU checks' per-job JSON files into one ``gpu_checks.json`` and print one line a job.

    python summarize.py OUT_DIR

Per job: GPU idle share from the profiler (truth), from supplyline's CudaTimeline in the job
(cross-check) and from the doctor's report.json when the doctor carries it; the doctor's verdict,
the GPU-side verdict, the expected one; the doctor's per-step overhead against the plain run.
Read defensively: a field the doctor does not write yet is None, not an error.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TARGETS = {"idle_share_points": 3.0, "overhead_pct": 1.0}


def load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def doctor_idle_share(report: dict[str, Any]) -> float | None:
    """The doctor's GPU idle share: ``report.json``'s ``gpu_idle.idle_share`` (absent when the
    doctor measured no CUDA events: a CPU machine, or a job that never initialised CUDA)."""
    value = (report.get("gpu_idle") or {}).get("idle_share")
    return float(value) if isinstance(value, (int, float)) else None


def job_summary(out: str, job: str) -> dict[str, Any]:
    plain, prof, tl = (load(os.path.join(out, f"{job}-{k}.json")) for k in ("plain", "profile", "timeline"))
    report = load(os.path.join(out, f"doctor-{job}", "report.json"))
    truth = (prof.get("profiler") or {}).get("idle_share")
    cross = (tl.get("timeline") or {}).get("idle_share")
    doctor = doctor_idle_share(report)
    gpu = report.get("gpu_idle") or {}
    plain_ms = plain.get("step_ms_median")
    doctor_ms = (report.get("steps") or {}).get("step_ms_median")
    overhead = 100.0 * (doctor_ms - plain_ms) / plain_ms if plain_ms and doctor_ms else None

    def points(x: float | None) -> float | None:
        return None if x is None or truth is None else 100.0 * (x - truth)

    return {
        "job": job,
        "expected": plain.get("expected") or prof.get("expected"),
        "idle_share_profiler": truth,
        "idle_share_timeline": cross,
        "idle_share_doctor": doctor,
        "timeline_minus_profiler_points": points(cross),
        "doctor_minus_profiler_points": points(doctor),
        "verdict_doctor": (report.get("verdict") or {}).get("bound"),
        "verdict_doctor_sentence": (report.get("verdict") or {}).get("sentence"),
        "gpu_bound_doctor": gpu.get("gpu_bound"),
        "cpu_ahead_ms_doctor": gpu.get("cpu_ahead_ms"),
        "gpu_idle_by_phase_share_doctor": gpu.get("by_phase_share"),
        "host_phase_share_doctor": gpu.get("host_phase_share"),
        "doctor_gpu_note": gpu.get("note") or None,
        "verdict_gpu_side": (tl.get("timeline") or {}).get("verdict"),
        "cpu_ahead_ms_median": (tl.get("timeline") or {}).get("cpu_ahead_ms_median"),
        "host_phase_share": (tl.get("timeline") or {}).get("host_phase_share"),
        "gpu_idle_by_phase_share": (tl.get("timeline") or {}).get("by_phase_share"),
        "step_ms_plain": plain_ms,
        "step_ms_doctor": doctor_ms,
        "doctor_overhead_pct": overhead,
        "timeline_note": (tl.get("timeline") or {}).get("note"),
    }


def fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def main(out: str, jobs: list[str]) -> None:
    rows = [job_summary(out, j) for j in jobs]
    result = {"targets": TARGETS, "jobs": rows}
    tmp = os.path.join(out, "gpu_checks.json.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    os.replace(tmp, os.path.join(out, "gpu_checks.json"))
    for r in rows:
        pct = {k: None if r[k] is None else 100 * r[k] for k in ("idle_share_profiler", "idle_share_timeline")}
        print(
            f"{r['job']:9} idle% profiler {fmt(pct['idle_share_profiler'])} timeline {fmt(pct['idle_share_timeline'])}"
            f" (Δ {fmt(r['timeline_minus_profiler_points'], '+.1f')} pt) doctor Δ "
            f"{fmt(r['doctor_minus_profiler_points'], '+.1f')} pt · verdict expected {r['expected']} "
            f"doctor {r['verdict_doctor']} gpu-side {r['verdict_gpu_side']} · ahead {fmt(r['cpu_ahead_ms_median'])} ms"
            f" · step {fmt(r['step_ms_plain'], '.2f')} → {fmt(r['step_ms_doctor'], '.2f')} ms"
            f" ({fmt(r['doctor_overhead_pct'], '+.1f')}%)"
        )


if __name__ == "__main__":
    jobs = ["starved", "ahead", "pageable", "pinned", "item", "ckpt"]
    main(sys.argv[1] if len(sys.argv) > 1 else "gpu-out", sys.argv[2:] or jobs)
