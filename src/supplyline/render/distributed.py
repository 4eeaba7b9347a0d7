"""Terminal summary of a merged torchrun report: verdict, straggler, ranks side by side, crashes."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from supplyline import phases as P
from supplyline.analyze.distributed import MergedReport, SideCell, crash_words

MAX_RANK_ROWS = 16  # beyond this, the table shows the median and the worst rank per column instead
COLUMNS = P.PHASE_ORDER
# Columns kept even when no rank spent time in them: the three that tell a straggler story.
ALWAYS_SHOWN = (P.DATA_WAIT, P.COMPUTE, P.COLLECTIVE)


def render_merged(report: MergedReport, out_dir: str, console: Console | None = None) -> None:
    c = console or Console(stderr=True, highlight=False)
    job = report.job
    c.rule(f"[bold]supplyline doctor[/] — {job.world_size} ranks on {len(job.nodes)} node(s)")
    v = report.verdict
    c.print(f"[bold]Job verdict:[/] [bold]{v.bound.upper()}[/] — {escape(v.sentence)}")
    rows = report.ranks
    shown = [r for r in rows if r.steps] if len(rows) <= MAX_RANK_ROWS else []
    sbs = report.side_by_side
    # Phases no rank spent time in stay out of the table, so it fits a terminal.
    columns = [p for p in COLUMNS if sbs and (sbs[p].worst_ms >= 0.05 or p in ALWAYS_SHOWN)]
    nodes = len(job.nodes) > 1
    table = Table(
        show_header=True, header_style="bold", expand=False, title="ms per step, median over each rank's steps"
    )
    table.add_column("rank", justify="right")
    if nodes:
        table.add_column("node")
    table.add_column("steps", justify="right")
    table.add_column("step", justify="right")
    for p in columns:
        table.add_column(P.label(p), justify="right")
    straggler = report.straggler.rank if report.straggler else None
    for r in shown:
        style = "bold red" if r.rank == straggler else ""
        node = [escape(str(r.hostname))] if nodes else []
        table.add_row(
            str(r.rank),
            *node,
            str(r.steps),
            f"{r.step_ms:.1f}",
            *(f"{r.phase_ms[p]:.1f}" for p in columns),
            style=style,
        )
    if sbs:
        pad = [""] if nodes else []
        table.add_row(
            "median",
            *pad,
            "",
            f"{sbs['step'].median_ms:.1f}",
            *(f"{sbs[p].median_ms:.1f}" for p in columns),
            style="dim",
        )
        table.add_row("worst", *pad, "", _worst(sbs["step"]), *(_worst(sbs[p]) for p in columns), style="dim")
        c.print(table)
    for crash in report.crashes:
        tag = "[bold red]first failure[/]" if crash.first else "[dim]then[/]"
        when = "" if crash.steps_before is None else f" after {crash.steps_before} steps"
        c.print(f"  {tag} rank {crash.rank}{when} — {escape(crash_words(crash))}")
    for note in report.notes:
        c.print(f"[dim]note: {escape(note)}[/]")
    c.print(f"\nMerged report: {escape(out_dir)}/report.json · per rank: {escape(out_dir)}/rank-K/")


def _worst(cell: SideCell) -> str:
    rank = cell.worst_rank
    return f"{cell.worst_ms:.1f}" + (f" r{rank}" if rank is not None else "")
