"""`supplyline report DIR`: re-render a saved run record without rerunning the job."""

from __future__ import annotations

import argparse
import os
import sys

from supplyline.errors import UserError

NAME = "report"
HELP = "re-render a saved run (DIR/record.json): terminal summary, or report.html / report.json / trace.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a report directory written by `supplyline doctor` (or its record.json)")
    p.add_argument("--html", action="store_true", help="write report.html (self-contained, opens from disk)")
    p.add_argument("--json", action="store_true", help="write report.json (findings, breakdown, what-if)")
    p.add_argument("--trace", action="store_true", help="write trace.json (Perfetto / chrome://tracing)")
    p.add_argument("--out", metavar="OUT", help="write the files here instead of DIR")
    p.add_argument("--details", action="store_true", help="print the full account instead of the one-screen summary")


def run(args: argparse.Namespace) -> int:
    from supplyline.doctor.merged import is_distributed_dir

    if (
        os.path.isdir(args.dir)
        and is_distributed_dir(args.dir)
        and not os.path.exists(os.path.join(args.dir, "record.json"))
    ):
        return _merged(args)  # a torchrun job's DIR/rank-K/ records: one merged report (docs/distributed.md)
    from supplyline.analyze.report import report_from_saved
    from supplyline.fixes import snippets
    from supplyline.render.console import render_summary
    from supplyline.render.files import write_files

    record, report = report_from_saved(args.dir, snippets)
    src_dir = args.dir if os.path.isdir(args.dir) else os.path.dirname(os.path.abspath(args.dir))
    kinds = [k for k in ("json", "trace", "html") if getattr(args, k)]
    if not kinds:
        render_summary(report, src_dir, details=args.details)
        return 0
    out_dir = args.out or src_dir
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {out_dir}: {exc.strerror or exc}") from exc
    written = write_files(report, record, out_dir, kinds)
    for path in written.paths:
        print(f"wrote {path}", file=sys.stderr)
    if written.failures:
        raise UserError(f"could not write to {out_dir}: " + "; ".join(written.failures))
    return 0


def _merged(args: argparse.Namespace) -> int:
    from supplyline.atomic import atomic_write_json
    from supplyline.doctor.merged import merge_dir
    from supplyline.render.distributed import render_merged

    report = merge_dir(args.dir)  # writes DIR/report.json
    if args.out and args.json:
        os.makedirs(args.out, exist_ok=True)
        atomic_write_json(os.path.join(args.out, "report.json"), report.to_dict())
    render_merged(report, args.dir)
    if args.html or args.trace:
        print(
            f"supplyline report: per-rank HTML and traces: `supplyline report {args.dir}/rank-K --html --trace`",
            file=sys.stderr,
        )
    return 0
