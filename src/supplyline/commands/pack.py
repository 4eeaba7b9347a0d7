"""``supplyline pack SRC DST``: loose files -> webdataset shards or an LMDB, with a manifest."""

from __future__ import annotations

import argparse
import os
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from supplyline.console import progress_bar, stdout_console
from supplyline.units import parse_size

NAME = "pack"
HELP = "pack a directory of small files into webdataset shards or an LMDB (resumable, checksummed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", metavar="SRC", help="directory of samples (KEY.EXT files, or CLASS/FILE folders)")
    parser.add_argument("dst", metavar="DST", help="output directory (new or empty)")
    parser.add_argument(
        "--format",
        choices=["webdataset", "lmdb"],
        default="webdataset",
        help="webdataset tar shards (default) or one LMDB environment",
    )
    parser.add_argument("--shard-size", default="256MB", help="webdataset: bytes per shard (default 256MB)")
    parser.add_argument(
        "--layout",
        choices=["auto", "basename", "imagefolder"],
        default="auto",
        help="how files form samples (default auto: class folders -> imagefolder)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample order shuffle (default 0)")
    parser.add_argument("--no-shuffle", action="store_true", help="keep samples in key order")
    parser.add_argument("--force", action="store_true", help="overwrite a DST that holds an earlier pack")
    parser.add_argument("--verify", action="store_true", help="read everything back and compare checksums")


def _progress(unit: str) -> Progress:
    return progress_bar(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit), TimeRemainingColumn()
    )


def run(args: argparse.Namespace) -> int:
    from supplyline.storage.files import describe_unreadable
    from supplyline.storage.pack.run import pack
    from supplyline.storage.pack.samples import plan_samples
    from supplyline.storage.pack.state import MANIFEST
    from supplyline.units import human_bytes

    out = stdout_console()
    if args.verify and not args.force and os.path.exists(os.path.join(args.dst, MANIFEST)):
        return _verify_only(args.dst, out)
    shard_size = parse_size(args.shard_size)
    seed = None if args.no_shuffle else args.seed
    plan = plan_samples(args.src, args.layout, seed)
    out.print(
        f"{len(plan.samples):,} samples from {plan.files:,} files ({human_bytes(plan.total_bytes)}), "
        f"layout {plan.layout}" + (f", {len(plan.classes)} classes" if plan.classes else ""),
        markup=False,
    )
    if plan.skipped:
        out.print(f"skipped {len(plan.skipped)}: {describe_unreadable(plan.skipped)}", markup=False)
    sys.stdout.flush()
    with _progress("samples") as progress:
        task = progress.add_task(f"packing ({args.format})", total=len(plan.samples))
        result = pack(
            plan, args.dst, args.format, shard_size, args.force, seed, lambda n: progress.update(task, completed=n)
        )
    manifest = result.manifest
    total = sum(s["bytes"] for s in manifest["shards"])
    out.print(
        f"{'resumed and finished' if result.resumed else 'wrote'} {manifest['samples']:,} samples into "
        f"{len(manifest['shards'])} {'shards' if args.format == 'webdataset' else 'file'} "
        f"({human_bytes(total)}) in {args.dst}",
        markup=False,
    )
    read_errors = len(manifest["skipped"]) - len(plan.skipped)
    if read_errors:
        out.print(f"{read_errors} samples could not be read and were left out (listed in the manifest)")
    out.print(f"manifest: {os.path.join(args.dst, MANIFEST)}", markup=False)
    if args.verify:
        _run_verify(args.dst, manifest["samples"], out)
    _usage_hint(args, out)
    return 0


def _verify_only(dst: str, out: Console) -> int:
    from supplyline.storage.pack.verify import load_manifest

    _run_verify(dst, load_manifest(dst)["samples"], out)
    return 0


def _run_verify(dst: str, total: int, out: Console) -> None:
    from supplyline.storage.pack.verify import verify

    with _progress("samples") as progress:
        task = progress.add_task("verifying", total=total)
        checked = verify(dst, lambda n: progress.update(task, completed=n))
    out.print(f"verified {checked:,} samples: shard checksums and sample contents match the manifest")


def _usage_hint(args: argparse.Namespace, out: Console) -> None:
    reader = "ShardDataset" if args.format == "webdataset" else "LMDBDataset"
    extra = ", shuffle_buffer=1000" if args.format == "webdataset" else ""
    out.print(f"read it with: from supplyline.datasets import {reader}; {reader}({args.dst!r}{extra})", markup=False)
