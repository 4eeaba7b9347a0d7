"""``supplyline stage SRC [DST]``: copy a dataset to /dev/shm (or DST), verified; ``--cleanup`` removes it."""

from __future__ import annotations

import argparse

from rich.progress import BarColumn, DownloadColumn, TextColumn, TransferSpeedColumn

from supplyline import cli_types
from supplyline.console import progress_bar, stdout_console
from supplyline.errors import UserError

NAME = "stage"
HELP = "copy a dataset to RAM (/dev/shm) if it fits, verified; --cleanup removes the copy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", metavar="SRC", help="dataset directory")
    parser.add_argument(
        "dst", metavar="DST", nargs="?", help="where to copy it (default /dev/shm/supplyline/<name of SRC>)"
    )
    parser.add_argument(
        "--margin",
        type=cli_types.fraction,
        default=0.10,
        help="free space to keep beyond the dataset's size, as a fraction (default 0.10)",
    )
    parser.add_argument("--force", action="store_true", help="replace an older staged copy at DST")
    parser.add_argument("--cleanup", action="store_true", help="remove the staged copy at DST instead")


def run(args: argparse.Namespace) -> int:
    from supplyline.storage.files import describe_unreadable
    from supplyline.storage.stage import cleanup, default_dst, stage
    from supplyline.units import human_bytes

    dst = args.dst or default_dst(args.src)
    out = stdout_console()
    if args.cleanup:
        removed = cleanup(dst)
        out.print(f"removed {dst}" if removed else f"nothing staged at {dst}", markup=False)
        return 0
    if not 0 <= args.margin < 10:
        raise UserError("--margin must be a fraction such as 0.1")
    with progress_bar(TextColumn("copying"), BarColumn(), DownloadColumn(), TransferSpeedColumn()) as progress:
        task = progress.add_task("copying", total=None)
        result = stage(args.src, dst, args.margin, args.force, lambda n: progress.update(task, completed=n))
    if result.already:
        out.print(f"already staged and up to date: {result.files:,} files ({human_bytes(result.bytes)})", markup=False)
    else:
        out.print(f"copied and verified {result.files:,} files ({human_bytes(result.bytes)})", markup=False)
    if result.skipped:
        out.print(f"skipped {len(result.skipped)} unreadable: {describe_unreadable(result.skipped)}", markup=False)
    out.print(f"remove it with: supplyline stage {args.src} {dst} --cleanup", markup=False)
    out.print(f"use this path in your training script: {result.dst}", markup=False)
    return 0
