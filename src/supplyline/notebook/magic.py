"""``%%supplyline [doctor options]``: the doctor around one notebook cell.

The cell runs under ``supplyline.watch()`` (the doctor's own session, record and report files),
in the notebook's namespace: IPython makes ``shell.user_ns`` the ``__main__`` module, so what the
cell defines stays defined afterwards and classes from earlier cells stay picklable for
DataLoader workers, as in a plain cell. The options are the doctor's (``commands/doctor.py``),
less those that name a script or start other processes. The cell's own exception reaches the
user as from a plain cell, after the report of what ran before it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any, NoReturn

from supplyline.commands import doctor
from supplyline.doctor.watch import Diagnosis, default_name, watch
from supplyline.errors import UserError
from supplyline.render.notebook import show_inline

# Doctor options that have no meaning for a cell (argparse dest -> the option as typed): hidden
# from the magic's --help, and refused in one line when given.
NOT_FOR_A_CELL = {
    "target": "a script",
    "module_args": "-m",
    "nproc_per_node": "--nproc-per-node",
    "nnodes": "--nnodes",
    "node_rank": "--node-rank",
    "rdzv_endpoint": "--rdzv-endpoint",
    "rdzv_backend": "--rdzv-backend",
    "rdzv_id": "--rdzv-id",
    "live": "--live",
}


class _HelpShown(Exception):
    """``--help`` printed its text: nothing to run."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting: a kernel must not ``sys.exit`` over a typo."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"%%supplyline: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            print(message, file=sys.stderr)
        raise _HelpShown()


def options_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="%%supplyline",
        description="Diagnose this cell as `supplyline doctor` diagnoses a script; the report shows inline.",
    )
    doctor.add_arguments(p)
    for action in p._actions:  # argparse keeps no public list of a parser's options
        if action.dest in NOT_FOR_A_CELL:
            action.help = argparse.SUPPRESS
    return p


def parse_options(line: str) -> argparse.Namespace | None:
    """The magic's line as doctor options; None after ``--help``. Bad input: one UserError line."""
    try:
        words = shlex.split(line)
    except ValueError as exc:  # an unclosed quote
        raise UserError(f"%%supplyline: {exc}") from None
    parser = options_parser()
    try:
        args = parser.parse_args(words)
    except _HelpShown:
        return None
    for action in parser._actions:
        option = NOT_FOR_A_CELL.get(action.dest)
        value = getattr(args, action.dest, None)
        given = value is not None if action.dest == "module_args" else value not in (action.default, [])
        if option is not None and given:
            raise UserError(
                f"%%supplyline diagnoses the cell itself: {option} does not apply here "
                "(for a script, run `!supplyline doctor SCRIPT.py` in a cell)"
            )
    doctor.check_limits(args)
    args.out = os.path.abspath(args.out)
    doctor.check_writable(args.out)
    return args


def register(shell: Any) -> None:
    """Register ``%%supplyline`` on an IPython shell (what ``%load_ext supplyline`` calls)."""

    def supplyline(line: str, cell: str) -> Diagnosis | None:
        __tracebackhide__ = True  # IPython leaves this frame out of the cell's traceback
        return run_cell(shell, line, cell)

    supplyline.__doc__ = options_parser().format_help()
    shell.register_magic_function(supplyline, magic_kind="cell", magic_name="supplyline")


def run_cell(shell: Any, line: str, cell: str) -> Diagnosis | None:
    """Run the cell under the doctor; the Diagnosis is the cell's result, shown inline."""
    __tracebackhide__ = True
    from IPython.core.error import UsageError

    try:
        args = parse_options(line)
    except UserError as exc:
        raise UsageError(str(exc)) from None  # IPython prints a UsageError as one line
    if args is None:
        return None
    code = _compile(shell, cell)  # a SyntaxError shows as it would for a plain cell
    run = None
    try:
        with watch(
            out=args.out,
            steps=args.steps,
            seconds=args.seconds,
            what_if=args.what_if,
            what_if_steps=args.what_if_steps,
            quiet=True,  # the Diagnosis is the cell's result: shown once, after the cell
            try_fixes=args.try_fixes,
            try_steps=args.try_steps,
            sample_hz=args.sample_hz,
            name=f"{default_name()} [cell {shell.execution_count}]",
        ) as run:
            exec(code, shell.user_ns)
    except BaseException:
        if run is not None and run.report is not None and not args.quiet:
            show_inline(run)  # what ran before the exception, then the cell's own traceback
        raise
    return None if args.quiet else run


def _compile(shell: Any, cell: str) -> Any:
    """The cell as IPython compiles it: its magics and ``!`` lines transformed, its source cached
    under the cell's name so that a traceback shows the cell's lines."""
    source = shell.transform_cell(cell)
    filename = shell.compile.cache(source, shell.execution_count, raw_code=cell)
    return shell.compile(source, filename, "exec")
