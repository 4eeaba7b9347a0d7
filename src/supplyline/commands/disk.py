"""``supplyline disk PATH``: what the dataset is, where it lives, how fast it reads, and what to do."""

from __future__ import annotations

import argparse
import os
import sys

from supplyline import cli_types
from supplyline.atomic import atomic_write_json
from supplyline.console import progress_bar, stdout_console
from supplyline.errors import UserError
from supplyline.units import parse_size

NAME = "disk"
HELP = "diagnose a dataset's storage: inventory, device, cold/warm read rates, and a verdict"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="dataset directory (or one file)")
    parser.add_argument("--json", metavar="FILE", help="also write the full report as JSON")
    parser.add_argument(
        "--threads", metavar="N,N,..", help="thread counts to measure (default: 1, one per core, 4 per core)"
    )
    parser.add_argument(
        "--seconds",
        type=cli_types.number(float, above=0, maximum=3600, unit="seconds"),
        default=5.0,
        help="time limit of each measurement (default 5)",
    )
    parser.add_argument("--block-size", default="1M", help="read size (default 1M)")
    parser.add_argument(
        "--sequential-bytes", default="1G", help="how much of the largest files the sequential test reads (default 1G)"
    )
    parser.add_argument(
        "--small-files",
        type=cli_types.count,
        default=4000,
        help="how many small files the small-file test reads, at most (default 4000)",
    )
    parser.add_argument(
        "--probe-dir",
        metavar="DIR",
        help="where to write a temporary large file when the dataset has none "
        "(default: inside PATH; must be on the same file system)",
    )
    parser.add_argument(
        "--only", metavar="TEST,..", help="run only these of: sequential, small_files, metadata (default: all)"
    )


def _thread_counts(text: str | None) -> list[int]:
    if text is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return sorted({1, cores, 4 * cores})
    try:
        counts = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1:
        raise UserError(f"--threads '{text}' must be positive whole numbers, e.g. 1,2,8")
    return counts


def _tests(text: str | None) -> tuple[str, ...]:
    from supplyline.storage.disk.diagnose import TESTS

    if text is None:
        return TESTS
    chosen = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [t for t in chosen if t not in TESTS]
    if unknown or not chosen:
        raise UserError(f"--only: unknown test {', '.join(unknown) or text!r}; choose from {', '.join(TESTS)}")
    return chosen


def run(args: argparse.Namespace) -> int:
    from supplyline.storage.disk.diagnose import Options, measure, survey
    from supplyline.storage.disk.render import render_measurements, render_survey, render_verdict
    from supplyline.storage.disk.verdict import verdict

    if args.seconds <= 0:
        raise UserError("--seconds must be more than 0")
    options = Options(
        thread_counts=_thread_counts(args.threads),
        seconds=args.seconds,
        block_size=parse_size(args.block_size),
        sequential_bytes=parse_size(args.sequential_bytes),
        small_files=max(1, args.small_files),
        probe_dir=args.probe_dir,
        tests=_tests(args.only),
    )
    out = stdout_console()
    report = survey(args.path, options)
    render_survey(report, out)
    out.print("[bold]Measuring[/bold] (Ctrl-C stops and keeps what was measured)")
    sys.stdout.flush()
    warm_only = report.location.kind == "memory"
    cells_total = len(options.thread_counts) * sum(1 if t == "metadata" or warm_only else 2 for t in options.tests)
    with progress_bar() as progress:
        task = progress.add_task("starting", total=cells_total)
        started = [0]

        def step(description: str) -> None:
            progress.update(task, description=description, completed=started[0])
            started[0] += 1

        measure(report, step)
        progress.update(task, completed=cells_total)
    render_measurements(report, out)
    render_verdict(report, out)
    if args.json:
        atomic_write_json(args.json, {**report.to_dict(), "verdict": verdict(report)})
        out.print(f"report written to {args.json}", markup=False)
    return 130 if report.interrupted else 0
