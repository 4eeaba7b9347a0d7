"""``supplyline tune MODULE:ATTR``: the fastest DataLoader settings for your dataset, measured."""

from __future__ import annotations

import argparse
from typing import Any

from supplyline import cli_types
from supplyline.errors import UserError

NAME = "tune"
HELP = "find the fastest DataLoader settings (workers, prefetch, persistence, batch size) for a dataset"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="a Dataset, or a callable returning a Dataset or a DataLoader (its settings "
        "become the baseline; its collate_fn and sampler are kept)",
    )
    parser.add_argument(
        "--batch-size", type=cli_types.count, default=None, help="batch size (default: the DataLoader's, else 64)"
    )
    parser.add_argument(
        "--batch-sizes",
        type=_int_list,
        default=None,
        metavar="B1,B2,...",
        help="also search these batch sizes, compared in samples/s",
    )
    parser.add_argument(
        "--budget", type=cli_types.seconds, default=60.0, metavar="SECONDS", help="time to spend measuring (default 60)"
    )
    who = parser.add_mutually_exclusive_group()
    who.add_argument(
        "--consumer-ms",
        type=cli_types.number(float, minimum=0, maximum=cli_types.DAY_S * 1000, unit="ms"),
        default=None,
        metavar="X",
        help="a synthetic training step of X ms per batch (sleeps: the CPU stays free)",
    )
    who.add_argument(
        "--consumer",
        default=None,
        metavar="MODULE:FN",
        help="your function taking a batch, called as the training step",
    )
    parser.add_argument(
        "--max-memory",
        type=cli_types.positive_float,
        default=None,
        metavar="GB",
        help="stop a configuration whose workers' total memory (PSS) exceeds this",
    )
    parser.add_argument(
        "--max-workers",
        type=cli_types.count_or_zero,
        default=None,
        metavar="N",
        help="highest num_workers to try (default 8 x cores, at most 64)",
    )
    parser.add_argument(
        "--transfer", action="store_true", help="also time host-to-device copies of real batches (needs CUDA)"
    )
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"'{text}': batch sizes must be integers of 1 or more")
    return values


def _check(args: argparse.Namespace) -> None:
    if args.budget <= 0:
        raise UserError(f"--budget must be more than 0 seconds, not {args.budget:g}")
    if args.batch_size is not None and args.batch_size < 1:
        raise UserError(f"--batch-size must be 1 or more, not {args.batch_size}")
    if args.max_memory is not None and args.max_memory <= 0:
        raise UserError(f"--max-memory must be more than 0 GB, not {args.max_memory:g}")
    if args.max_workers is not None and args.max_workers < 0:
        raise UserError(f"--max-workers must be 0 or more, not {args.max_workers}")


def _kept_notes(kwargs: dict[str, Any]) -> list[str]:
    kept: list[str] = [k for k in ("shuffle", "sampler", "collate_fn", "worker_init_fn") if k in kwargs]
    if kwargs.get("drop_last"):
        kept.append("drop_last")
    return [f"keep from your DataLoader: {', '.join(kept)}"] if kept else []


def run(args: argparse.Namespace) -> int:
    _check(args)
    try:
        return _run(args)
    except SystemExit as exc:  # the user's dataset or consumer code, not ours: argparse is done
        raise UserError(
            f"the code under test called sys.exit({exc.code}) while tune ran it; tune needs a dataset "
            "that returns items (an exit inside __getitem__ or the consumer stops the measurement)"
        ) from None


def _run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from supplyline import atomic
    from supplyline.console import progress_bar, stdout_console
    from supplyline.tune.consumer import make_consumer
    from supplyline.tune.report import print_report, to_json
    from supplyline.tune.runner import TuneOptions, cuda_available, tune
    from supplyline.tune.target import resolve_target
    from supplyline.tune.transfer import run_transfer

    if args.json:
        atomic.check_writable(args.json)  # before the search, not after it
    consumer = make_consumer(args.consumer_ms, args.consumer)
    target = resolve_target(args.target, args.batch_size)
    batch = target.baseline.batch_size
    sizes = [batch] + [b for b in (args.batch_sizes or []) if b != batch]
    cuda = cuda_available()
    options = TuneOptions(
        batch_sizes=sizes,
        budget_s=args.budget,
        cuda=cuda,
        max_workers=args.max_workers,
        max_memory_bytes=int(args.max_memory * 1e9) if args.max_memory else None,
    )
    # The bar's total is the time budget, so it shows time, not a count; what is left is the budget's rest
    # (the search stops at the budget, or earlier when it has its answer).
    with progress_bar(
        TextColumn("{task.description:<40}"), BarColumn(), TimeElapsedColumn(), TextColumn("{task.fields[left]}")
    ) as progress:
        task = progress.add_task("probing the dataset", total=args.budget, left=f"≤{args.budget:.0f} s left")

        def on_progress(what: str, elapsed: float) -> None:
            left = max(0.0, args.budget - elapsed)
            progress.update(task, description=what, completed=min(elapsed, args.budget), left=f"≤{left:.0f} s left")

        result = tune(target, consumer, options, on_progress=on_progress)
    out = stdout_console()
    print_report(result, out, consumer.description, cuda, _kept_notes(target.loader_kwargs))
    document = to_json(result, args.target, consumer.description, args.budget, cuda)
    if args.transfer:
        model = result.models.get(batch)
        lines, rows = run_transfer(lambda: _batches(target, result), model.consumer_wall_s if model else 0.0, cuda)
        for line in lines:
            out.print(line)
        document["transfer"] = rows or None
    if args.json:
        atomic.atomic_write_json(args.json, document)
    return 130 if result.interrupted else 0


def _batches(target: Any, result: Any, count: int = 3) -> list[Any]:
    from supplyline.tune.space import LoaderConfig

    size = result.recommended.config.batch_size if result.recommended else target.baseline.batch_size
    batches = []
    for batch in target.make_loader(LoaderConfig(batch_size=size)):
        batches.append(batch)
        if len(batches) == count:
            break
    return batches
