"""What the tuner prints and saves: the table, the paste-ready call, the JSON document."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from supplyline.tune.measure import Measurement
from supplyline.tune.search import SearchResult
from supplyline.tune.space import worker_ladder
from supplyline.units import human_bytes, human_duration

SCHEMA = "supplyline.tune/1"


def speedup(result: SearchResult) -> float | None:
    rec, base = result.recommended, result.baseline
    if rec is None or not base.ok or base.score() <= 0:
        return None
    return rec.score() / base.score()


def _time(x: float | None) -> str:
    return human_duration(x) if x is not None else "-"


def table(result: SearchResult) -> Table:
    t = Table(title="Configurations tried, fastest first", title_justify="left")
    for name in (
        "batch",
        "workers",
        "prefetch",
        "persistent",
        "samples/s",
        "epoch samples/s",
        "first batch",
        "restart",
        "workers PSS",
        "runs",
        "note",
    ):
        t.add_column(name, justify="left" if name == "note" else "right")
    ordered = sorted(result.measurements, key=lambda m: (-m.score(), m.config.num_workers))
    for m in ordered:
        c = m.config
        notes = []
        if m is result.recommended:
            notes.append("recommended")
        if m is result.baseline:
            notes.append("baseline")
        if not m.ok:
            notes.append(f"{m.status}: {m.reason}")
        if m.derived_from:
            notes.append("derived*")
        if c.pin_memory:
            notes.append("pin_memory")
        if c.start_method:
            notes.append(c.start_method)
        t.add_row(
            str(c.batch_size),
            str(c.num_workers),
            str(c.prefetch_factor or "-"),
            ("yes" if c.persistent_workers else "no") if c.num_workers else "-",
            f"{m.samples_per_s:,.0f}" if m.ok else "-",
            f"{m.epoch_samples_per_s:,.0f}" if m.ok else "-",
            _time(m.time_to_first_batch_s),
            _time(m.restart_s),
            human_bytes(m.workers_pss_bytes) if m.workers_pss_bytes else "-",
            "-" if m.derived_from else str(len(m.runs)),
            ", ".join(notes),
        )
    return t


def print_report(result: SearchResult, out: Console, consumer: str, cuda: bool, keeps: list[str]) -> None:
    out.print(table(result))
    if any(m.derived_from for m in result.measurements):
        out.print("* derived: the persistent run's steady rate, with every epoch paying its cold start")
    base, rec = result.baseline, result.recommended
    out.print(f"consumer: {consumer}")
    out.print(
        f"baseline: {base.config.code()}  "
        + (f"{base.samples_per_s:,.0f} samples/s" if base.ok else f"{base.status}: {base.reason}")
    )
    if not cuda:
        out.print("pin_memory: does not apply (no CUDA device on this machine)")
    if result.interrupted:
        out.print("interrupted: the recommendation uses what was measured so far")
    if result.skipped_for_budget:
        out.print(
            f"budget: {result.skipped_for_budget} more configuration(s) skipped; a larger --budget would try them"
        )
    if rec is None:
        out.print("no configuration completed: nothing to recommend")
        return
    gain = speedup(result)
    out.print(
        f"recommended: {rec.epoch_samples_per_s:,.0f} samples/s per epoch"
        + (f", {gain:.2f}x the baseline" if gain else "")
    )
    why = capped_by(result)
    if why:
        out.print(f"why not more workers: {why}", markup=False, highlight=False, soft_wrap=True)
    for note in keeps:
        out.print(note)
    out.print(rec.config.code(), markup=False, highlight=False, soft_wrap=True)


def capped_by(result: SearchResult) -> str | None:
    """What the model says caps the recommended batch size's rate past its knee."""
    size = result.recommended.config.batch_size if result.recommended else None
    model = result.models.get(size) if size is not None else None
    if model is None:
        return None
    return model.capped_by(worker_ladder(model.cores, max(m.config.num_workers for m in result.measurements)))


def to_json(result: SearchResult, spec: str, consumer: str, budget_s: float, cuda: bool) -> dict[str, Any]:
    rec: Measurement | None = result.recommended
    recommended = None
    if rec is not None:
        c = rec.config
        recommended = {
            "num_workers": c.num_workers,
            "prefetch_factor": c.prefetch_factor,
            "persistent_workers": c.persistent_workers,
            "pin_memory": c.pin_memory,
            "batch_size": c.batch_size,
            "start_method": c.start_method,
            "code": c.code(),
            "samples_per_s": round(rec.samples_per_s, 2),
            "epoch_samples_per_s": round(rec.epoch_samples_per_s, 2),
        }
    return {
        "schema": SCHEMA,
        "target": spec,
        "consumer": consumer,
        "budget_s": budget_s,
        "elapsed_s": round(result.elapsed_s, 3),
        "interrupted": result.interrupted,
        "cuda": cuda,
        "baseline": result.baseline.to_json(),
        "recommended": recommended,
        "speedup": round(speedup(result) or 0.0, 3) or None,
        "capped_by": capped_by(result),
        "models": {str(b): m.to_json() for b, m in result.models.items()},
        "configurations": [m.to_json() for m in result.measurements],
    }
