"""Write what a doctor run produced: record.json, then report.json, trace.json and report.html, and
the terminal summary — which needs no disk and is printed whatever the disk says."""

from __future__ import annotations

import os
import sys

from supplyline.analyze.report import Report, build_report
from supplyline.errors import UserError
from supplyline.fixes import snippets
from supplyline.record import RunRecord
from supplyline.render.console import render_summary
from supplyline.render.files import write_failure, write_files


def _warn(message: str) -> None:
    print(f"supplyline doctor: warning: {message}", file=sys.stderr)


def write_outputs(
    record: RunRecord, out_dir: str, quiet: bool = False, failures: list[str] | None = None, details: bool = False
) -> Report | None:
    """Save the record first (the source of truth), then everything derived from it.

    A failure while deriving degrades to a warning; a file that cannot be written (full disk, no
    permission) is named once with the reason, and the summary is printed all the same.
    """
    failures = list(failures or [])  # files not written earlier in the run, named in the same line
    saved = False
    try:
        os.makedirs(out_dir, exist_ok=True)
        record.save(out_dir)
        saved = True
    except (OSError, UserError) as exc:  # a full disk: the summary below needs no disk
        failures.append(f"record.json: {write_failure(exc)}")
    try:
        report = build_report(record, snippets)
    except Exception as exc:  # never lose the run over an analysis bug
        where = f"the record is saved in {out_dir}/record.json" if saved else "the record could not be saved"
        _warn(f"could not analyse the run ({type(exc).__name__}: {exc}); {where}")
        return None
    written = ["record.json"] if saved else []
    if saved:
        try:
            files = write_files(report, record, out_dir)
            failures += files.failures
            written += [os.path.basename(p) for p in files.paths]
        except Exception as exc:  # a rendering bug: the record is on disk, `supplyline report DIR` can retry
            _warn(
                f"could not render the report files ({type(exc).__name__}: {exc}); the record is saved in {out_dir}/record.json"
            )
    if failures:
        _warn(f"could not write to {out_dir}: " + "; ".join(failures))
    if not quiet:
        try:
            render_summary(report, out_dir if saved else None, written=written, details=details)
        except Exception as exc:
            _warn(f"could not print the summary ({type(exc).__name__}: {exc})")
    return report
