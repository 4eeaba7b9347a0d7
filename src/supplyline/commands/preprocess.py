"""``supplyline preprocess MODULE:ATTR``: where each sample's CPU time goes, and whether the GIL holds it."""

from __future__ import annotations

import argparse
from typing import Any

from supplyline import cli_types
from supplyline.atomic import atomic_write_json, check_writable
from supplyline.errors import UserError

NAME = "preprocess"
HELP = (
    "time a dataset's __getitem__, transform stages, collate and worker hand-over; profile it "
    "(cProfile, hot lines, inside workers); check the GIL; suggest fixes"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="the dataset (or DataLoader, or a no-argument function/class building one), "
        "e.g. mydata:train_set or path/to/data.py:train_set",
    )
    parser.add_argument(
        "--samples", type=cli_types.count, default=100, help="samples to time (default 100, spread over the dataset)"
    )
    parser.add_argument(
        "--workers",
        type=cli_types.count_or_zero,
        default=2,
        help="DataLoader workers to profile in, and threads/processes for the GIL check (default 2; 0: skip workers)",
    )
    parser.add_argument(
        "--batch-size",
        type=cli_types.count,
        default=None,
        help="batch size for collate/transfer (default: the DataLoader's, else 32)",
    )
    parser.add_argument(
        "--transform-attr",
        metavar="NAME",
        default=None,
        help="attribute holding the transform chain, dotted (default: look for transform/transforms/...)",
    )
    parser.add_argument("--json", metavar="FILE", default=None, help="write the full report as JSON")
    parser.add_argument(
        "--prof",
        metavar="FILE.prof",
        default=None,
        help="write the main-process cProfile (snakeviz FILE.prof); workers' merged profile goes to FILE.workers.prof",
    )
    parser.add_argument(
        "--start-method",
        choices=["fork", "spawn", "forkserver"],
        default=None,
        help="how worker processes start (default: the DataLoader's, else the platform's)",
    )
    parser.add_argument("--no-gil-check", action="store_true", help="skip the threads-vs-processes GIL check")
    parser.add_argument("--seed", type=int, default=0, help="seed for picking which indices to time")


class _RichProgress:
    """Phase name and a bar on stderr; the report itself goes to stdout."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.task: Any = None

    def phase(self, name: str, total: int | None = None) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(name, total=total)

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.progress.advance(self.task, n)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except SystemExit as exc:  # the user's dataset code, not ours: argparse is done
        raise UserError(
            f"the code under test called sys.exit({exc.code}) while preprocess ran it (in __getitem__, a "
            "transform or at import); preprocess needs a dataset that returns items"
        ) from None


def _run(args: argparse.Namespace) -> int:
    from supplyline.console import progress_bar, stdout_console
    from supplyline.preprocess import Target, profile_dataset
    from supplyline.preprocess.render import render
    from supplyline.target import load_attr

    for flag, value, low in (
        ("--samples", args.samples, 1),
        ("--workers", args.workers, 0),
        ("--batch-size", args.batch_size, 1),
    ):
        if value is not None and value < low:
            raise UserError(f"{flag} must be at least {low}, got {value}")
    for path in (args.json, args.prof):
        if path:
            check_writable(path)  # before minutes of profiling, not after
    target = Target.of(load_attr(args.target), args.target)
    with progress_bar() as bar:
        report = profile_dataset(
            target,
            samples=args.samples,
            workers=args.workers,
            batch_size=args.batch_size,
            transform_attr=args.transform_attr,
            prof_path=args.prof,
            start_method=args.start_method,
            seed=args.seed,
            gil_check=not args.no_gil_check,
            target_name=args.target,
            progress=_RichProgress(bar),
        )
    render(report, stdout_console())
    if args.json:
        atomic_write_json(args.json, report.to_dict())
    if report.interrupted:
        return 130
    return 1 if report.getitem is None or report.getitem.count == 0 else 0
