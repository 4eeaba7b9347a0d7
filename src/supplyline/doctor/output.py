"""Write what a doctor run produced: record.json, report.json, trace.json, report.html, and the terminal summary."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from supplyline.analyze.report import build_report
from supplyline.atomic import atomic_write_json, atomic_write_text
from supplyline.record import RunRecord
from supplyline.render.console import render_summary

# Each derived file and how to make it from the record and its report (imports stay lazy).
DERIVED = {"json": "report.json", "trace": "trace.json", "html": "report.html"}


def write_derived(
    record: RunRecord, report: dict[str, Any], out_dir: str, kinds: Iterable[str] = ("json", "trace", "html")
) -> list[str]:
    """Write the chosen derived files atomically; returns their paths. Shared with `supplyline report`."""
    paths = []
    for kind in kinds:
        path = os.path.join(out_dir, DERIVED[kind])
        if kind == "json":
            atomic_write_json(path, report)
        elif kind == "trace":
            from supplyline.render.trace import build_trace

            atomic_write_json(path, build_trace(record))
        else:
            from supplyline.render.html import build_html

            atomic_write_text(path, build_html(record, report))
        paths.append(path)
    return paths


def write_outputs(record: RunRecord, out_dir: str, quiet: bool = False) -> dict:
    """Save the record first (the source of truth), then everything derived from it.

    A failure while deriving degrades to a warning: the record is already on disk and
    `supplyline report DIR` can render it again.
    """
    os.makedirs(out_dir, exist_ok=True)
    record.save(out_dir)
    report: dict = {}
    try:
        report = build_report(record)
        write_derived(record, report, out_dir)
        if not quiet:
            render_summary(report, out_dir)
    except Exception as exc:  # never lose the run over a rendering bug
        print(
            f"supplyline: warning: could not render the report ({type(exc).__name__}: {exc}); "
            f"the record is saved in {out_dir}/record.json",
            file=sys.stderr,
        )
    return report
