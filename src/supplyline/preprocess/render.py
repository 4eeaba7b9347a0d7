"""Terminal rendering of a ``PreprocessReport`` (rich); knows nothing about how it was measured."""

from __future__ import annotations

import os

from rich.console import Console
from rich.markup import escape as e
from rich.table import Table

from supplyline.preprocess.report import Distribution, Location, PreprocessReport
from supplyline.units import human_bytes


def _ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"


def _where(location: Location | None) -> str:
    if location is None:
        return "?"
    return f"{os.path.basename(location.file)}:{location.line}"


def _dist(d: Distribution) -> str:
    slowest = f" (index {d.slowest[0][0]})" if d.slowest else ""
    return f"median {_ms(d.median_ms)}  p95 {_ms(d.p95_ms)}  max {_ms(d.max_ms)}{slowest}  over {d.count}"


def render(report: PreprocessReport, console: Console) -> None:
    console.print(
        f"[bold]supplyline preprocess[/bold] {e(report.target)}: {e(report.dataset_type)}, "
        f"{len(report.indices)} of {report.dataset_len} samples"
    )
    _summary(report, console)
    _chain(report, console)
    _profile(report, console)
    _lines(report, console)
    _workers(report, console)
    if report.gil:
        console.print(f"\n[bold]GIL[/bold]  {e(report.gil.verdict)}")
    if report.decode:
        timings = ", ".join(f"{d.name} {_ms(d.ms_per_image)} (×{d.speedup_vs_pil:.2f})" for d in report.decode.decoders)
        console.print(f"\n[bold]Decoders[/bold] on {report.decode.files} of your images: {e(timings)}")
        for missing in report.decode.unavailable:
            console.print(f"  not available: {e(missing)}")
    _suggestions(report, console)
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {e(note)}")
    if report.interrupted:
        console.print("[yellow]interrupted: the report holds what was measured before Ctrl-C[/yellow]")


def _summary(r: PreprocessReport, console: Console) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    if r.getitem:
        cpu = f"  CPU {r.cpu_share:.0%}" if r.cpu_share is not None else ""
        table.add_row("__getitem__", _dist(r.getitem) + cpu)
        if r.cpu_wait_share >= 0.1 and r.getitem_own:
            table.add_row(
                "busy machine",
                f"{r.cpu_wait_share:.0%} of that wall time was spent waiting for a CPU; "
                "stage times below leave that wait out",
            )
            table.add_row("  own time", _dist(r.getitem_own))
    if r.errors:
        first = r.errors[0]
        table.add_row(
            "errors",
            f"{len(r.errors)} raised: index {first.index} {e(first.error)} ({e(_where(first.location))})"
            + (f" and {len(r.errors) - 1} more" if len(r.errors) > 1 else ""),
        )
    if r.collate:
        table.add_row("collate", f"median {_ms(r.collate.median_ms)} per batch over {r.collate.count}")
    if r.transfer:
        t = r.transfer
        table.add_row(
            "transfer",
            f"{_ms(t.transfer_ms_per_batch)} per batch of {t.batch_size} worker->trainer "
            f"({human_bytes(t.tensor_bytes)} tensors, {human_bytes(t.pickled_bytes)} pickled, "
            f"{t.throughput_mb_s:.0f} MB/s)",
        )
    if r.sample_deterministic is not None:
        table.add_row(
            "deterministic",
            "yes: dataset\\[i] repeats exactly" if r.sample_deterministic else "no (random augmentation)",
        )
    console.print(table)


def _chain(r: PreprocessReport, console: Console) -> None:
    if not r.chain:
        return
    c = r.chain
    table = Table(
        title=f"transform chain: {e(c.attribute)} ({c.kind}, {len(c.stages)} stages), ranked", title_justify="left"
    )
    for col in ("rank", "stage", "median", "share", "kinds", "deterministic", "where"):
        table.add_column(col, justify="right" if col in ("rank", "median", "share") else "left")
    ranked = sorted(c.stages, key=lambda s: s.share_of_sample, reverse=True)
    for rank, s in enumerate(ranked, 1):
        kinds = f"{'/'.join(s.input_kinds)} -> {'/'.join(s.output_kinds)}"
        det = {True: "yes", False: "no", None: "?"}[s.deterministic]
        table.add_row(
            str(rank),
            e(s.name),
            _ms(s.time.median_ms),
            f"{s.share_of_sample:.0%}",
            e(kinds),
            det,
            e(_where(s.location)),
        )
    console.print()
    console.print(table)
    console.print(
        f"type churn: {e(' -> '.join(c.kind_path))}: {c.conversions_per_sample:.1f} conversions, "
        f"{c.round_trips_per_sample:.1f} round trips per sample"
    )


def _profile(r: PreprocessReport, console: Console) -> None:
    if not r.profile:
        return
    p = r.profile
    where = f", written to {e(p.prof_path)} (open with snakeviz)" if p.prof_path else ""
    table = Table(title=f"cProfile, {p.samples} samples, self time per sample{where}", title_justify="left")
    for col in ("self", "cumulative", "calls", "share", "function"):
        table.add_column(col, justify="left" if col == "function" else "right")
    for h in p.top[:10]:
        table.add_row(
            _ms(h.self_ms_per_sample),
            _ms(h.cumulative_ms_per_sample),
            str(h.calls),
            f"{h.self_share:.0%}",
            e(f"{h.location.function} ({h.location.file}:{h.location.line})"),
        )
    console.print()
    console.print(table)
    if p.conversions_per_sample:
        conv = ", ".join(f"{k} {v:.1f}" for k, v in p.conversions_per_sample.items())
        console.print(f"conversions per sample: {e(conv)}")
    if p.decode_share:
        console.print(f"image decoding: {p.decode_share:.0%} of __getitem__ time")


def _lines(r: PreprocessReport, console: Console) -> None:
    if not r.lines or not r.lines.lines:
        return
    table = Table(
        title=f"hot lines, {r.lines.samples} samples every {r.lines.interval_ms:.0f} ms", title_justify="left"
    )
    for col in ("share", "where", "loop", "source"):
        table.add_column(col, justify="right" if col == "share" else "left")
    for h in r.lines.lines[:8]:
        table.add_row(
            f"{h.share:.0%}",
            e(f"{h.location.function} ({_where(h.location)})"),
            f"in loop @{h.loop_line}" if h.in_python_loop else "",
            e(h.source[:60]),
        )
    console.print()
    console.print(table)


def _workers(r: PreprocessReport, console: Console) -> None:
    if not r.workers:
        return
    w = r.workers
    ratio = (
        f"; worker __getitem__ is ×{w.main_vs_worker_ratio:.2f} the main-process time" if w.main_vs_worker_ratio else ""
    )
    merged = f", merged profile {e(w.merged_prof_path)}" if w.merged_prof_path else ""
    console.print(f"\n[bold]workers[/bold] {w.workers} ({w.start_method}), {w.batches} batches{ratio}{merged}")
    for p in w.per_worker:
        console.print(
            f"  worker {p.worker_id} (pid {p.pid}): {p.getitem_calls} samples, mean {_ms(p.getitem_mean_ms)}, "
            f"top: {e(p.top_function)}"
        )


def _suggestions(r: PreprocessReport, console: Console) -> None:
    if not r.suggestions:
        console.print("\n[bold]suggestions[/bold]: none — nothing measured stood out")
        return
    console.print("\n[bold]suggestions[/bold]")
    for n, s in enumerate(r.suggestions, 1):
        console.print(
            f" {n}. [bold]{s.kind}[/bold] at {e(s.where)}\n    measured: {e(s.measured)}\n    do: {e(s.action)}"
        )
