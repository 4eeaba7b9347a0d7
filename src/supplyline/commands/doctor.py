"""`supplyline doctor`: run an unchanged training script, attribute every step's time, one verdict."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from supplyline import cli_types
from supplyline.errors import UserError

if TYPE_CHECKING:  # the command module stays light: torch loads only when a job runs
    from supplyline.analyze.report import Report
    from supplyline.doctor.ranks import RankInfo
    from supplyline.doctor.session import DoctorSession
    from supplyline.launch import Outcome
    from supplyline.record import RunRecord

NAME = "doctor"
HELP = "run a training script unchanged and find what starves it (data wait, transfer, logging, checkpoints)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out", default="supplyline-report", metavar="DIR", help="where to write the report (default: %(default)s)"
    )
    p.add_argument(
        "--steps", type=cli_types.count, metavar="N", help="stop the job cleanly after N observed training steps"
    )
    p.add_argument(
        "--seconds", type=cli_types.seconds, metavar="T", help="stop the job cleanly after T seconds of training"
    )
    p.add_argument(
        "--no-what-if",
        dest="what_if",
        action="store_false",
        help="skip the what-if phases (compute-only replay, loader-only drain) after the observed steps",
    )
    p.add_argument(
        "--what-if-steps", type=int, default=20, metavar="K", help="steps in each what-if phase (default: %(default)s)"
    )
    p.add_argument(
        "--no-try",
        dest="try_fixes",
        action="store_false",
        help="skip the fix trial (after the observed steps, the top findings' fixes applied in-process and measured)",
    )
    p.add_argument(
        "--try-steps",
        type=cli_types.count,
        default=40,
        metavar="N",
        help="steps each fix trial runs, shared by its candidates or A/B stretches (default: %(default)s)",
    )
    p.add_argument(
        "--sample-hz",
        type=cli_types.number(float, minimum=1, maximum=1000, unit="samples per second"),
        default=25.0,
        metavar="HZ",
        help="stack samples per second (default: %(default)s); raise it for short runs whose line shares rest "
        "on too few samples (each sample costs ~5-10 µs of the sampler thread)",
    )
    p.add_argument("--quiet", action="store_true", help="write the report files but print no summary")
    p.add_argument(
        "--details",
        action="store_true",
        help="print the full account (per-line tables, what-if, trial stretches, every finding and note) "
        "instead of the one-screen summary",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="show a panel on stderr, refreshed in place while the job runs (step rate, phases, CPU, disk, GPU)",
    )
    from supplyline.doctor.launcher import add_launcher_arguments

    add_launcher_arguments(p)
    p.add_argument(
        "-m",
        dest="module_args",
        nargs=argparse.REMAINDER,
        metavar="MODULE ARGS",
        help="run a module as `python -m MODULE` would",
    )
    p.add_argument(
        "target",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT.py ARGS",
        help="the training script and its arguments (everything after it goes to the script)",
    )


def run(args: argparse.Namespace) -> int:
    from supplyline.launch import parse_target

    check_limits(args)
    if args.module_args:
        target = parse_target(args.module_args[1:], module=args.module_args[0])
    elif args.module_args is not None:
        raise UserError("-m needs a module name")
    else:
        target = parse_target(args.target)
    out_dir = os.path.abspath(args.out)
    check_writable(out_dir)
    if args.nproc_per_node is not None:
        from supplyline.doctor.launcher import launch_ranks

        return launch_ranks(target, out_dir, args)
    from supplyline.doctor.ranks import RankInfo

    rank = RankInfo.from_env()
    if rank is not None and rank.world_size > 1 and args.seconds is not None:
        raise UserError("under torchrun use --steps N, not --seconds: every rank must stop at the same step")
    return _diagnose(target, out_dir, args, rank)


def check_limits(args: argparse.Namespace) -> None:
    """The step and time limits, checked the same way for the CLI and the notebook magic."""
    for name in ("steps", "what_if_steps", "try_steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1")
    if args.seconds is not None and args.seconds <= 0:
        raise UserError("--seconds must be greater than 0")


def check_writable(out_dir: str) -> None:
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the report directory {out_dir}: {exc.strerror}") from exc
    if not os.access(out_dir, os.W_OK):
        raise UserError(f"the report directory {out_dir} is not writable")


def _start_live(session, title: str):
    from supplyline.render.live import LiveView

    view = LiveView(title, session.clock, lambda: session.monitor)
    if view.start():
        return view
    print("supplyline doctor: --live needs a terminal on stderr; the summary follows at the end", file=sys.stderr)
    return None


def _diagnose(target, out_dir: str, args: argparse.Namespace, rank: RankInfo | None = None) -> int:
    from supplyline.doctor.options import DoctorOptions
    from supplyline.doctor.ranks import Terminated, rank_dir, write_started
    from supplyline.doctor.session import DoctorSession
    from supplyline.doctor.signals import HardExitHook, SigtermGuard, quiet_workers
    from supplyline.launch import Outcome, run_target
    from supplyline.record import TargetInfo

    info = TargetInfo(target.kind, target.name, target.args, os.getcwd())
    root_dir = out_dir
    if rank is not None:  # one rank of a torchrun job: its own folder, the merge at the end
        out_dir = rank_dir(root_dir, rank.rank)
    options = DoctorOptions.from_args(args)
    session = DoctorSession(info, out_dir, options, rank=rank)
    if options.trial_needs_a_limit:
        session.trials.note = "not run: the trial follows the observed steps, so it needs --steps N or --seconds T"
    try:
        session.start()
    except Exception as exc:  # never lose the user's run over our hooks: run it plainly instead
        session.hooks.uninstall()
        print(
            f"supplyline doctor: warning: could not attach to the job ({type(exc).__name__}: {exc}); "
            f"running it without diagnosis",
            file=sys.stderr,
        )
        return run_target(target).exit_code
    live = (
        _start_live(session, os.path.basename(target.name) if target.kind == "script" else target.name)
        if args.live
        else None
    )
    guard = SigtermGuard()
    written: list[bool] = []

    def finish(outcome: Outcome) -> None:
        """Everything after the script: its own output, then our record, report and summary (once)."""
        if written:
            return
        written.append(True)
        quiet_workers()
        if live is not None:
            live.stop()
        _write(session, outcome, out_dir, root_dir, args, rank)

    hard_exit = HardExitHook(lambda code: finish(Outcome(code, "os_exit")))
    if rank is not None:
        write_started(root_dir, rank)
    guard.install()
    hard_exit.install()
    try:
        outcome = run_target(target)
    except Terminated as exc:  # the signal landed just as the script ended
        outcome = Outcome(143, "terminated", "Terminated", str(exc))
    finally:
        guard.stop_raising()
        hard_exit.uninstall()
    try:
        finish(outcome)
    finally:
        guard.uninstall()
    if guard.received:
        guard.exit_as_terminated()
        return 143
    for lost in session.trial.lost_saves:
        print(f"supplyline doctor: error: {lost}", file=sys.stderr)
    if session.trial.lost_saves and outcome.exit_code == 0:
        return 1  # a checkpoint the script believes saved never reached the disk: not a success
    return outcome.exit_code


def _write(
    session: DoctorSession,
    outcome: Outcome,
    out_dir: str,
    root_dir: str,
    args: argparse.Namespace,
    rank: RankInfo | None,
) -> None:
    if outcome.exception_type == "Terminated":
        # Our own signal-to-exception bridge, not the script's exception: the record says
        # "terminated" with the signal's message, never the internal class name.
        outcome.exit_code, outcome.reason, outcome.traceback_text = 143, "terminated", None
        outcome.exception_type = None
        who = f"rank {rank.rank}: " if rank else ""
        print(f"supplyline doctor: {who}{outcome.exception_message}; writing the report", file=sys.stderr)
    if outcome.traceback_text:
        sys.stderr.write(outcome.traceback_text)  # the script's own traceback, as python would show it
    elif outcome.reason == "sys_exit" and outcome.exception_message:
        print(outcome.exception_message, file=sys.stderr)
    elif outcome.reason == "os_exit":
        print(
            f"supplyline doctor: the script called os._exit({outcome.exit_code}); writing the report", file=sys.stderr
        )
    try:
        from supplyline.doctor.output import write_outputs

        record = session.stop(outcome)
        report = write_outputs(
            record,
            out_dir,
            quiet=args.quiet or rank is not None,
            failures=session.log_failures,
            details=getattr(args, "details", False),
        )
        if rank is not None:
            _finish_rank(record, report, rank, root_dir, args.quiet)
        if outcome.reason == "stopped" and session.stop_message:
            print(f"supplyline doctor: {session.stop_message}", file=sys.stderr)
    except UserError as exc:  # e.g. the disk filled up: say so in one line, keep the script's exit code
        print(f"supplyline doctor: warning: {exc}", file=sys.stderr)
    except Exception as exc:  # supplyline's own failure must not change the script's exit code
        print(
            f"supplyline doctor: warning: the report could not be written ({type(exc).__name__}: {exc})",
            file=sys.stderr,
        )


def _finish_rank(record: RunRecord, report: Report | None, rank: RankInfo, root_dir: str, quiet: bool) -> None:
    from supplyline.doctor.ranks import finish_rank

    if not quiet and report is not None:
        v = report.verdict
        print(f"supplyline doctor: rank {rank.rank}: {v.bound.upper()} — {v.sentence}", file=sys.stderr)
    finish_rank(record, rank, root_dir, quiet)
