"""`supplyline compare BASE NEW`: two saved runs side by side; a CI gate for input-pipeline regressions."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from supplyline.errors import UserError

NAME = "compare"
HELP = "compare two saved runs (step time, samples/s, phase shares, findings); exit 1 when a threshold is crossed"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", metavar="BASE", help="the reference run's report directory (or record.json)")
    p.add_argument("new", metavar="NEW", help="the run to check against BASE")
    p.add_argument(
        "--max-slowdown",
        type=float,
        metavar="PCT",
        help="fail (exit 1) when NEW's median step time is more than PCT%% above BASE's",
    )
    p.add_argument(
        "--max-data-wait",
        type=float,
        metavar="PCT",
        help="fail (exit 1) when NEW spends more than PCT%% of its step time waiting for data",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    from supplyline.analyze.compare import compare_reports

    for name in ("max_slowdown", "max_data_wait"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise UserError(f"--{name.replace('_', '-')} must be 0 or more")
    base = _load(args.base, "BASE")
    new = _load(args.new, "NEW")
    result = compare_reports(base, new, args.max_slowdown, args.max_data_wait)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 1 if result["failed"] else 0


def _load(path: str, label: str) -> dict[str, Any]:
    from supplyline.analyze.report import report_from_saved

    try:
        return report_from_saved(path)[1].to_dict()
    except UserError as exc:
        raise UserError(f"{label}: {exc}") from exc


def _fmt(value: float | None, unit: str = "") -> str:
    return "—" if value is None else f"{value:.1f}{unit}"


def _print(result: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from supplyline import phases as P
    from supplyline.console import stdout_console

    c = stdout_console()
    c.print(f"[bold]BASE[/] {escape(result['base']['target'])}: {escape(result['base']['verdict']['sentence'])}")
    c.print(f"[bold]NEW[/]  {escape(result['new']['target'])}: {escape(result['new']['verdict']['sentence'])}")
    t = Table(show_header=True, header_style="bold")
    for col in ("", "BASE", "NEW", "change"):
        t.add_column(col, justify="right" if col else "left")
    names = {
        "step_ms_median": ("median step", " ms"),
        "step_ms_p95": ("p95 step", " ms"),
        "steps_per_s": ("steps/s", ""),
        "samples_per_s": ("samples/s", ""),
    }
    for key, m in result["metrics"].items():
        label, unit = names[key]
        change = "—" if m["change_pct"] is None else f"{m['change_pct']:+.1f}%"
        t.add_row(label, _fmt(m["base"], unit), _fmt(m["new"], unit), change)
    for p, s in result["phase_share"].items():
        t.add_row(
            f"{P.label(p)} share",
            f"{s['base'] * 100:.1f}%",
            f"{s['new'] * 100:.1f}%",
            f"{s['change_points']:+.1f} pt",
        )
    c.print(t)
    f = result["findings"]
    c.print(
        "findings BASE: "
        + (", ".join(x["check"] for x in f["base"]) or "none")
        + " · NEW: "
        + (", ".join(x["check"] for x in f["new"]) or "none")
        + (f" · appeared: {', '.join(f['appeared'])}" if f["appeared"] else "")
        + (f" · resolved: {', '.join(f['resolved'])}" if f["resolved"] else "")
    )
    for g in result["gates"]:
        c.print(("[bold red]FAIL[/] " if g["failed"] else "[green]ok[/]   ") + escape(g["text"]))
    if result["gates"] and not result["failed"]:
        print("compare: all thresholds met", file=sys.stderr)
