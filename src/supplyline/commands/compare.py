"""`supplyline compare BASE NEW`: two saved runs side by side; a CI gate for input-pipeline regressions."""

from __future__ import annotations

import argparse
import glob
import json
import sys
from typing import TYPE_CHECKING

from supplyline import cli_types
from supplyline.errors import UserError

if TYPE_CHECKING:
    from supplyline.analyze.compare import Comparison, Metric
    from supplyline.analyze.report import Report
    from supplyline.record import RunRecord

NAME = "compare"
HELP = "compare two saved runs (step time, samples/s, phase shares, findings); exit 1 when a threshold is crossed"


# ``BASE... -- NEW...``: argparse swallows a bare ``--``, so ``prepare_argv`` turns it into this
# hidden option before parsing; options may then follow the NEW runs as anywhere else.
_NEW_SIDE = "--new-side-runs"


def prepare_argv(argv: list[str]) -> list[str]:
    """The compare arguments with the first bare ``--`` (BASE runs before it, NEW runs after)
    spelled as the hidden ``--new-side-runs`` option."""
    if "--" not in argv:
        return argv
    i = argv.index("--")
    return [*argv[:i], _NEW_SIDE, *argv[i + 1 :]]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.usage = "%(prog)s BASE NEW [options]\n       %(prog)s BASE [BASE...] -- NEW [NEW...] [options]"
    p.add_argument(
        "runs",
        nargs="+",
        metavar="BASE NEW",
        help="the reference run's report directory (or record.json) and the run to check against it; "
        "several runs a side as BASE... -- NEW... (a quoted glob also stands for several runs)",
    )
    p.add_argument(_NEW_SIDE, nargs="+", default=None, dest="new_side", help=argparse.SUPPRESS)
    p.add_argument("--base-runs", nargs="+", default=[], metavar="DIR", help="more BASE runs, pooled with BASE")
    p.add_argument("--new-runs", nargs="+", default=[], metavar="DIR", help="more NEW runs, pooled with NEW")
    p.add_argument(
        "--max-slowdown",
        type=cli_types.number(float, minimum=0, unit="%"),
        metavar="PCT",
        help="fail (exit 1) when NEW's median step time is more than PCT%% above BASE's and the slowdown is "
        "significant (one-sided Mann-Whitney p < 0.01 and the 95%% block-bootstrap interval of the ratio above "
        "the limit; with one run a side that interval is widened by the run-to-run allowance, see docs/ci.md)",
    )
    p.add_argument(
        "--max-data-wait",
        type=cli_types.number(float, minimum=0, maximum=100, unit="%"),
        metavar="PCT",
        help="fail (exit 1) when NEW spends more than PCT%% of its step time waiting for data",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    from supplyline.analyze.compare import compare_reports, gate_times, observed_step_times

    for name in ("max_slowdown", "max_data_wait"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise UserError(f"--{name.replace('_', '-')} must be 0 or more")
    base_paths, new_paths = _sides(args.runs, args.new_side)
    base, base_records = _load_side([*base_paths, *args.base_runs], "BASE")
    new, new_records = _load_side([*new_paths, *args.new_runs], "NEW")
    base_steps = [observed_step_times(r) for r in base_records]
    new_steps = [observed_step_times(r) for r in new_records]
    gate = gate_times(base_records, new_records)
    result = compare_reports(base, new, args.max_slowdown, args.max_data_wait, base_steps, new_steps, gate)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        _print(result)
    return 1 if result.failed else 0


def _sides(runs: list[str], new_side: list[str] | None) -> tuple[list[str], list[str]]:
    """BASE and NEW paths from ``BASE NEW`` or ``BASE... -- NEW...``."""
    if new_side is not None:
        return runs, new_side
    if len(runs) != 2:
        raise UserError(f"expected BASE NEW (got {len(runs)} runs); for several runs a side write BASE... -- NEW...")
    return [runs[0]], [runs[1]]


def _expand(patterns: list[str]) -> list[str]:
    """Each pattern's matches, sorted; a pattern matching nothing stays as given, so a missing run
    is reported by name rather than silently dropped."""
    paths: list[str] = []
    for pattern in patterns:
        paths.extend(sorted(glob.glob(pattern)) or [pattern])
    return list(dict.fromkeys(paths))


def _load_side(patterns: list[str], label: str) -> tuple[Report, list[RunRecord]]:
    """The first run's report (verdict, phases, findings) and every run's record."""
    from supplyline.analyze.report import report_from_saved

    reports: list[Report] = []
    records: list[RunRecord] = []
    for path in _expand(patterns):
        try:
            record, report = report_from_saved(path)
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from exc
        if not report.steps.observed:
            raise UserError(f"{label} ({path}) has no observed training steps to compare")
        reports.append(report)
        records.append(record)
    return reports[0], records


def _fmt(value: float | None, unit: str = "") -> str:
    return "—" if value is None else f"{value:.1f}{unit}"


def _with_interval(m: Metric, side: str, unit: str) -> str:
    value, interval = getattr(m, side), getattr(m, f"{side}_interval")
    if interval is None or value is None:
        return _fmt(value, unit)
    return f"{value:.1f}{unit} [{interval[0]:.1f}–{interval[1]:.1f}]"


def _print(result: Comparison) -> None:
    from rich.markup import escape
    from rich.table import Table

    from supplyline import phases as P
    from supplyline.console import stdout_console

    c = stdout_console()
    c.print(f"[bold]BASE[/] {escape(result.base.target)}: {escape(result.base.verdict.sentence)}")
    c.print(f"[bold]NEW[/]  {escape(result.new.target)}: {escape(result.new.verdict.sentence)}")
    t = Table(show_header=True, header_style="bold")
    for col in ("", "BASE", "NEW", "change"):
        t.add_column(col, justify="right" if col else "left")
    names = {
        "step_ms_median": ("median step", " ms"),
        "step_ms_p95": ("p95 step", " ms"),
        "steps_per_s": ("steps/s", ""),
        "samples_per_s": ("samples/s", ""),
    }
    for key, m in result.metrics.items():
        label, unit = names[key]
        change = "—" if m.change_pct is None else f"{m.change_pct:+.1f}%"
        t.add_row(label, _with_interval(m, "base", unit), _with_interval(m, "new", unit), change)
    for p, s in result.phase_share.items():
        t.add_row(f"{P.label(p)} share", f"{s.base * 100:.1f}%", f"{s.new * 100:.1f}%", f"{s.change_points:+.1f} pt")
    c.print(t)
    f = result.findings
    c.print(
        "findings BASE: "
        + (", ".join(x.check for x in f.base) or "none")
        + " · NEW: "
        + (", ".join(x.check for x in f.new) or "none")
        + (f" · appeared: {', '.join(f.appeared)}" if f.appeared else "")
        + (f" · resolved: {', '.join(f.resolved)}" if f.resolved else "")
    )
    slow = result.slowdown
    if slow:
        lo, hi = slow.ratio_interval
        runs = f" · pooled {slow.base_runs} vs {slow.new_runs} runs" if slow.base_runs + slow.new_runs > 2 else ""
        what = "median step less its CPU wait" if slow.basis == "own" else "median step"
        c.print(
            f"NEW/BASE {what} {slow.ratio:.3f} (95% CI {lo:.3f}–{hi:.3f}, block bootstrap) · one-sided "
            f"Mann-Whitney p={slow.p_value:.2g} · {slow.base_steps} vs {slow.new_steps} steps{runs}"
        )
        for note in (slow.note, slow.runs_note):
            if note:
                c.print(escape(note))
    for g in result.gates:
        c.print(("[bold red]FAIL[/] " if g.failed else "[green]ok[/]   ") + escape(g.text))
    if result.gates and not result.failed:
        print("compare: all thresholds met", file=sys.stderr)
