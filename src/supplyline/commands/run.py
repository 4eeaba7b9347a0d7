"""`supplyline run --apply SPEC train.py ARGS`: the whole job with fixes applied in-process, no code change.

Nothing of the doctor runs: no sampler, no per-batch hooks. The only measurement is torch's global
optimizer post-step hook counting steps for the closing line.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from supplyline.errors import UserError

if TYPE_CHECKING:
    from supplyline.apply.spec import ApplySpec
    from supplyline.launch import Target

NAME = "run"
HELP = "run a training script with fixes applied in-process (DataLoader settings, async logging and saves)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from supplyline.apply.spec import APPLY_TO

    p.add_argument(
        "--apply",
        metavar="SPEC",
        help="what to change: num_workers=N,prefetch_factor=N,persistent_workers,pin_memory,async_save,"
        "async_logging; or 'auto' with --from",
    )
    p.add_argument(
        "--from",
        dest="from_path",
        metavar="REPORT",
        help="a doctor report directory (or its report.json) or a `tune --json` file: --apply auto takes its "
        "recommendation",
    )
    p.add_argument(
        "--apply-to",
        choices=APPLY_TO,
        default="auto",
        help="which DataLoaders get the settings: 'train' (shuffled ones), 'all', or 'auto' (shuffled ones, and "
        "unshuffled ones made before any shuffled one; default)",
    )
    p.add_argument(
        "-m", dest="module_args", nargs=argparse.REMAINDER, metavar="MODULE ARGS", help="run a module as python -m"
    )
    p.add_argument(
        "target", nargs=argparse.REMAINDER, metavar="SCRIPT.py ARGS", help="the training script and its arguments"
    )


def resolve_spec(apply: str | None, from_path: str | None) -> ApplySpec:
    from supplyline.apply.spec import check_loader, parse_spec, spec_from_saved

    if apply is None and from_path is None:
        raise UserError(
            "nothing to apply: give --apply SPEC (e.g. --apply num_workers=2,async_logging) or --from REPORT"
        )
    if apply is None or apply.strip() == "auto":
        if from_path is None:
            raise UserError("--apply auto needs --from REPORT_DIR (a doctor report) or --from TUNE.json")
        spec = spec_from_saved(from_path)
        check_loader(spec.loader)
        return spec
    if from_path is not None:
        raise UserError("--from goes with --apply auto; with explicit settings leave --from out")
    return parse_spec(apply)


def run(args: argparse.Namespace) -> int:
    from supplyline.launch import parse_target

    spec = resolve_spec(args.apply, args.from_path)
    if args.module_args:
        target = parse_target(args.module_args[1:], module=args.module_args[0])
    elif args.module_args is not None:
        raise UserError("-m needs a module name")
    else:
        target = parse_target(args.target)
    return _run_applied(target, spec, args.apply_to)


def _say(line: str) -> None:
    # The real stderr, flushed now: async_logging queues the script's own stderr writes.
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"supplyline run: {line}\n")
    stream.flush()


def _run_applied(target: Target, spec: ApplySpec, apply_to: str) -> int:
    from supplyline.apply.session import AppliedFixes
    from supplyline.launch import run_target

    fixes = AppliedFixes(spec, apply_to)
    try:
        fixes.install()
    except Exception as exc:  # never lose the user's run over our patches: run it plainly instead
        _say(f"warning: could not apply the fixes ({type(exc).__name__}: {exc}); running the script unchanged")
        return run_target(target).exit_code
    loaders = f" (DataLoaders: {apply_to})" if spec.loader else ""
    source = "" if spec.source == "--apply" else f", from {spec.source}"
    _say(f"applying {spec.describe()}{loaders}{source}")
    outcome = run_target(target)
    problems = fixes.finish()
    if outcome.traceback_text:
        sys.stderr.write(outcome.traceback_text)  # the script's own traceback, as python would show it
    elif outcome.reason == "sys_exit" and outcome.exception_message:
        print(outcome.exception_message, file=sys.stderr)
    for problem in problems:
        _say(f"error: {problem}")
    rate = fixes.counter.rate()
    steps = f"{fixes.counter.steps} optimizer steps" + (f", {rate:.1f} steps/s (first to last step)" if rate else "")
    done = fixes.summary()
    _say(steps + (f"; {done}" if done else ""))
    if problems and outcome.exit_code == 0:
        return 1  # a checkpoint that never reached the disk must not look like success
    return outcome.exit_code
