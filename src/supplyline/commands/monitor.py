"""``supplyline monitor``: watch the host, a PID's process tree, or a command until it exits."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

import psutil

from supplyline import cli_types
from supplyline.analyze.oscillation import detect_oscillation
from supplyline.collect.sampler import Monitor, open_for_writing
from supplyline.collect.summary import metric_series
from supplyline.errors import UserError
from supplyline.render.monitor_view import MonitorLiveView, render_monitor_summary

NAME = "monitor"
HELP = "live CPU, memory, disk, GPU and process-tree monitor; with a command, follow it until it exits"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interval", type=cli_types.seconds, default=1.0, metavar="S", help="seconds between samples (default 1)"
    )
    parser.add_argument("--log", metavar="FILE.jsonl", help="write every sample as one JSON line (flushed each sample)")
    parser.add_argument("--csv", metavar="FILE", help="write host metrics and process-tree totals as CSV columns")
    parser.add_argument("--pid", type=int, metavar="PID", help="watch this process and its descendants until it exits")
    parser.add_argument(
        "--duration", type=cli_types.seconds, metavar="S", help="stop after S seconds (host or --pid mode)"
    )
    # dest is not "command": the top-level parser keeps the sub-command's name there.
    parser.add_argument(
        "run_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND ARGS",
        help="run COMMAND, follow its process tree, return its exit code",
    )


def run(args: argparse.Namespace) -> int:
    command = list(args.run_command)
    if command and command[0] == "--":
        command = command[1:]
    if not args.interval > 0:
        raise UserError(f"--interval must be > 0 seconds, got {args.interval:g}")
    if args.duration is not None and not args.duration > 0:
        raise UserError(f"--duration must be > 0 seconds, got {args.duration:g}")
    if command and args.pid is not None:
        raise UserError("give either --pid or a command, not both")
    if command and args.duration is not None:
        raise UserError("--duration applies to --pid or whole-host mode; a command runs until it exits")
    if command:
        return monitor_command(command, args.interval, args.log, args.csv)
    if args.pid is not None:
        _check_pid(args.pid)
    session = _Session(args.interval, args.log, args.csv)
    monitor = session.start(args.pid)
    deadline = None if args.duration is None else time.monotonic() + args.duration
    watched = f"PID {args.pid}" if args.pid is not None else "host"
    session.follow(
        monitor,
        watched,
        lambda: (
            (args.pid is not None and not monitor.tree_alive) or (deadline is not None and time.monotonic() >= deadline)
        ),
    )
    session.finish(monitor, watched)
    return 0


def monitor_command(
    command: Sequence[str],
    interval: float = 1.0,
    log: str | None = None,
    csv: str | None = None,
    title: str | None = None,
) -> int:
    """Run ``command`` under the monitor, print the summary, return the command's exit code.

    The command gets its own session, so a terminal's Ctrl-C reaches supplyline alone; it is
    forwarded to the command once per press (never twice), and the summary is printed when the
    command ends. (A new session rather than a new process group: a background process group that
    reads the terminal is stopped by SIGTTIN, a process in another session is not.)
    """
    session = _Session(interval, log, csv)
    for path in (log, csv):  # fail on an unwritable log before the command runs, not after
        if path:
            open_for_writing(path).close()
    try:
        child = subprocess.Popen(list(command), start_new_session=True)
    except FileNotFoundError:
        raise UserError(f"command not found: {command[0]}", code=127) from None
    except PermissionError:
        raise UserError(f"cannot run {command[0]}: permission denied", code=126) from None
    except OSError as exc:
        raise UserError(f"cannot run {command[0]}: {exc.strerror or exc}", code=126) from None
    session.child = child
    try:
        monitor = session.start(child.pid)
    except BaseException:
        child.kill()
        child.wait()
        raise
    watched = title or f"{command[0]} (PID {child.pid})"
    session.follow(monitor, watched, lambda: child.poll() is not None)
    code = child.wait()
    session.finish(monitor, watched)
    return 128 - code if code < 0 else code  # killed by signal N -> 128+N, as shells report it


def _check_pid(pid: int) -> None:
    if pid <= 0:
        raise UserError(f"no process with PID {pid}")
    try:
        alive = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, ValueError):
        alive = False
    except psutil.AccessDenied:
        alive = True  # another user's process: its counters may be partly hidden, but it exists
    if not alive:
        raise UserError(f"no process with PID {pid}")


class _Session:
    """The parts every mode shares: start the monitor, show it live, handle Ctrl-C, print the summary."""

    def __init__(self, interval: float, log: str | None, csv: str | None) -> None:
        self.interval, self.log, self.csv = interval, log, csv
        self.child: subprocess.Popen[bytes] | None = None
        self.interrupts = 0

    def start(self, pid: int | None) -> Monitor:
        monitor = Monitor(interval=self.interval, log=self.log, csv=self.csv, pid=pid, tree=pid is not None)
        return monitor.start()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.interrupts += 1
        if self.child is not None and self.child.poll() is None:
            # Third press: the command ignores SIGINT; stop it for good.
            sig = signal.SIGKILL if self.interrupts >= 3 else signum
            try:
                os.killpg(self.child.pid, sig)
            except ProcessLookupError:
                pass

    def follow(self, monitor: Monitor, watched: str, done: Callable[[], bool]) -> None:
        view = MonitorLiveView(watched, monitor.gpu_status)
        if not view.enabled:
            print(
                f"supplyline monitor: watching {watched} every {self.interval:g} s"
                f"{f', logging to {self.log}' if self.log else ''}; Ctrl-C stops",
                file=sys.stderr,
                flush=True,
            )
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            with view:
                # With a command, Ctrl-C is forwarded and we wait for it to end; otherwise it stops us.
                while not done() and (self.child is not None or self.interrupts == 0):
                    view.update(monitor.samples[-1] if monitor.samples else None)
                    time.sleep(min(0.1, self.interval))
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def finish(self, monitor: Monitor, title: str) -> None:
        monitor.stop()
        summary = monitor.summary()
        render_monitor_summary(summary, monitor.gpu_status, title)
        # Utilization that drops periodically means waiting for data (docs/how-it-works.md). Said only when seen.
        gpu_util = [m for m in summary.metrics if m.startswith("gpu") and m.endswith(".util_pct")]
        for name in [*gpu_util, "tree.root_cpu_pct", "tree.children_cpu_pct"]:
            times, values = metric_series(monitor.samples, name)
            if len(values) >= 12 and (result := detect_oscillation(values, timestamps=times)).oscillates:
                print(f"{name} oscillates: {result.reason}")
        if monitor.errors:
            print(f"supplyline monitor: {monitor.errors} samples failed (see the warning above)", file=sys.stderr)
