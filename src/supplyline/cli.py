"""One entry point. Each sub-command is a module in ``supplyline.commands``.

A command module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``,
and may define ``prepare_argv(argv) -> argv`` to rewrite its own arguments before argparse sees
them (``compare BASE... -- NEW...``: argparse would swallow the bare ``--``).
Adding a command means adding one module: this file discovers them, so commands written in
parallel never touch a shared list.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from supplyline import __version__
from supplyline.errors import UserError

_ORDER = ["demo", "monitor", "doctor", "run", "report", "compare", "tune", "disk", "pack", "stage", "preprocess"]


def _command_modules() -> list[ModuleType]:
    import supplyline.commands as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    names.sort(key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    return [importlib.import_module(f"supplyline.commands.{n}") for n in names]


class _OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (its default prints the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="supplyline",
        description="Find and remove the CPU and disk bottlenecks that starve model training.",
    )
    parser.add_argument("--version", action="version", version=f"supplyline {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of supplyline's own errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _prepared(argv: list[str]) -> list[str]:
    """``argv`` with the command's own arguments passed through its ``prepare_argv``, if it has one."""
    for i, token in enumerate(argv):
        if token.startswith("-"):
            continue  # a global option (--debug) before the command
        if token == "--":
            break
        module = next((m for m in _command_modules() if m.NAME == token), None)
        prepare = getattr(module, "prepare_argv", None)
        return [*argv[: i + 1], *prepare(argv[i + 1 :])] if prepare else argv
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    argv = _prepared(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a bad argument (already said in one line)
        return exc.code if isinstance(exc.code, int) else 2 if exc.code else 0
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        if args.debug:
            raise
        print(f"supplyline {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"supplyline {args.command}: interrupted", file=sys.stderr)
        return 130
