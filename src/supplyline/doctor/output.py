"""Write what a doctor run produced: record.json, report.json, trace.json, and the terminal summary."""
from __future__ import annotations

import os
import sys

from supplyline.analyze.report import build_report
from supplyline.atomic import atomic_write_json
from supplyline.record import RunRecord
from supplyline.render.console import render_summary
from supplyline.render.trace import build_trace


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
        atomic_write_json(os.path.join(out_dir, "report.json"), report)
        atomic_write_json(os.path.join(out_dir, "trace.json"), build_trace(record))
        if not quiet:
            render_summary(report, out_dir)
    except Exception as exc:  # never lose the run over a rendering bug
        print(f"supplyline: warning: could not render the report ({type(exc).__name__}: {exc}); "
              f"the record is saved in {out_dir}/record.json", file=sys.stderr)
    return report
