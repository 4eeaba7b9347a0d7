"""`supplyline merge DIR`: one report from the per-rank records of a torchrun job."""

from __future__ import annotations

import argparse
import json
import os
import sys

from supplyline.errors import UserError

NAME = "merge"
HELP = "merge the per-rank records of a torchrun job (DIR/rank-K/record.json) into DIR/report.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="the doctor's --out directory, holding rank-0/, rank-1/, ...")
    p.add_argument("--json", action="store_true", help="print the merged report as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="write DIR/report.json but print no summary")


def run(args: argparse.Namespace) -> int:
    from supplyline.doctor.merged import merge_dir
    from supplyline.render.distributed import render_merged

    if not os.path.isdir(args.dir):
        raise UserError(f"no such directory: {args.dir}")
    report = merge_dir(args.dir)
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not args.quiet:
        render_merged(report, args.dir)
    return 0
