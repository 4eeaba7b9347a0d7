"""RunRecord -> the report: verdict, findings, breakdown, what-if and DataLoader facts.

The report is derived data (schema in docs/report-schema.md); the record stays the source of truth.
"""

from __future__ import annotations

import shlex
import statistics
from dataclasses import asdict
from typing import Any

from supplyline.analyze.breakdown import breakdown
from supplyline.analyze.findings import all_findings, verdict
from supplyline.analyze.recommend import recommended_loader
from supplyline.analyze.supply import supply_signal
from supplyline.errors import UserError
from supplyline.record import RunRecord, load_record

REPORT_VERSION = 1


def build_report(record: RunRecord) -> dict[str, Any]:
    b = breakdown(record)
    sig = supply_signal(record)
    loader = sig.loader
    commands = dataset_commands(loader)
    findings = all_findings(record, b, sig, commands)
    w = record.whatif
    observed_rate = 1 / b.step_s_median if b.step_s_median else None
    consumer_rate = 1 / w.compute_only_step_s if w.compute_only_step_s else None
    loader_rate = (
        w.loader_only_batches_per_s / b.batches_per_step if w.loader_only_batches_per_s and b.batches_per_step else None
    )
    notes = list(record.notes)
    if not record.loaders:
        notes.append("no DataLoader was seen: data wait cannot be measured")
    elif loader is None:
        notes.append("no training DataLoader was identified (no optimizer step or backward followed a batch)")
    if w.enabled and not w.ran and w.note:
        notes.append(f"what-if skipped: {w.note}")
    return {
        "report_version": REPORT_VERSION,
        "target": asdict(record.target),
        "outcome": {k: v for k, v in asdict(record.outcome).items() if k != "traceback"},
        "verdict": verdict(b, findings, record),
        "findings": [f.to_dict() for f in findings],
        "steps": {
            "observed": b.steps,
            "warmup_excluded": b.warmup_steps_excluded,
            "step_ms_median": b.step_s_median * 1e3,
            "step_ms_mean": b.step_s_mean * 1e3,
            "step_ms_p95": b.step_s_p95 * 1e3,
            "steps_per_s": b.steps_per_s,
            "samples_per_s": b.samples_per_s,
            "batches_per_step": b.batches_per_step,
        },
        "phase_share": b.phase_share,
        "phase_ms_per_step": {p: v / b.steps * 1e3 if b.steps else 0.0 for p, v in b.phase_s.items()},
        "whatif": {
            "label": "what-if phases: the job's last batch replayed (compute-only) and its loader drained with no "
            "consumer (loader-only); these steps are not part of the observed figures",
            "enabled": w.enabled,
            "ran": w.ran,
            "note": w.note,
            "observed_steps_per_s": observed_rate,
            "compute_only_steps_per_s": consumer_rate,
            "loader_only_steps_per_s": loader_rate,
            "consumer_bound_speedup": (consumer_rate / observed_rate if consumer_rate and observed_rate else None),
        },
        "dataloader": _loader_facts(loader, sig),
        "dataloader_recommended": recommended_loader(
            loader,
            sig.stall,
            record.host.cpu_count,
            record.host.cuda_available,
            input_bound=any(f.check in ("dataloader", "storage", "preprocessing") for f in findings),
        ),
        "top_lines": b.top_lines,
        "data_wait_lines": b.data_wait_lines,
        "transfers": record.transfers,
        "checkpoints": {"saves": len(record.saves), "seconds": sum(s["duration_s"] for s in record.saves)},
        "outside_steps_s": record.outside_steps_s,
        "utilization": _utilization(record),
        "notes": notes,
    }


def report_from_saved(path: str) -> tuple[RunRecord, dict[str, Any]]:
    """Load a saved record and analyse it; a record that parses but does not add up is one line."""
    record = load_record(path)
    try:
        return record, build_report(record)
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise UserError(f"the run record at {path} is inconsistent ({type(exc).__name__}: {exc})") from exc


def _utilization(record: RunRecord) -> dict[str, Any]:
    """GPU utilization and total worker CPU over time, with the periodic-drop detector of the monitor
    (utilization that keeps dropping from high to low means the GPU waits for data: docs/how-it-works.md)."""
    from supplyline.analyze.oscillation import detect_oscillation

    samples = record.monitor.get("samples") or []
    times = [s["time_unix_s"] for s in samples]
    out: dict[str, Any] = {"gpu_note": record.monitor.get("gpu_note")}
    series = {
        "gpu_util_pct": [
            statistics.mean(g["util_pct"] for g in s["gpus"] if g.get("util_pct") is not None)
            if any(g.get("util_pct") is not None for g in s.get("gpus", []))
            else None
            for s in samples
        ],
        "workers_cpu_pct": [sum(p["cpu_pct"] for p in s.get("processes", []) if p["role"] != "root") for s in samples],
    }
    for name, values in series.items():
        pts = [(t, v) for t, v in zip(times, values) if v is not None]
        if len(pts) < 2:
            continue
        res = detect_oscillation([v for _, v in pts], timestamps=[t for t, _ in pts])
        out[name] = {"mean": statistics.mean(v for _, v in pts), "oscillation": asdict(res)}
    return out


def _loader_facts(loader: dict[str, Any] | None, sig: Any) -> dict[str, Any] | None:
    if loader is None:
        return None
    keys = (
        "batch_size",
        "num_workers",
        "pin_memory",
        "prefetch_factor",
        "persistent_workers",
        "multiprocessing_context",
        "dataset_type",
        "dataset_len",
        "batch_bytes",
        "epochs_started",
    )
    facts = {k: loader.get(k) for k in keys}
    firsts = loader.get("first_batch_s") or []
    facts["time_to_first_batch_s"] = firsts[0] if firsts else None
    facts["epoch_first_batch_s"] = firsts
    facts["stall"] = sig.stall
    facts["worker_cpu_pct_mean"] = sig.worker_cpu_pct_mean
    facts["host_cpu_busy_pct_mean"] = sig.host_cpu_busy_pct_mean
    facts.update(dataset_commands(loader))
    return facts


def dataset_commands(loader: dict[str, Any] | None) -> dict[str, str | None]:
    """The exact `supplyline tune` / `supplyline preprocess` commands for the training dataset,
    when the doctor could name it as an importable MODULE:ATTR."""
    spec = loader.get("dataset_spec") if loader else None
    if not spec:
        return {"tune_command": None, "preprocess_command": None}
    quoted = shlex.quote(spec)
    batch = f" --batch-size {loader['batch_size']}" if loader and loader.get("batch_size") else ""
    return {"tune_command": f"supplyline tune {quoted}{batch}", "preprocess_command": f"supplyline preprocess {quoted}"}
