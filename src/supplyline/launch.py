"""Run a user's script or ``-m`` module in this process, exactly as ``python`` would.

What ``python train.py a b`` gives the script, we give it too: ``sys.argv``, ``__name__ ==
"__main__"``, ``sys.path[0]`` = the script's directory (``-m``: the working directory), an absolute
``__file__``, and classes that stay picklable for spawn-started DataLoader workers: runpy runs the
code in a real module registered as ``sys.modules["__main__"]``, so pickle finds
``__main__.MyDataset`` by name; ``exec`` in a fresh dict would leave such classes unreachable.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import runpy
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from supplyline.errors import UserError


class StopTraining(BaseException):
    """Raised from a hook to end the user's job cleanly (``--steps``/``--seconds`` reached).

    A BaseException so that a script's ``except Exception`` does not swallow it.
    """


@dataclass
class Target:
    kind: str  # "script" or "module"
    name: str  # absolute script path, or module name
    args: list[str] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        return [self.name if self.kind == "script" else self._module_file(), *self.args]

    def _module_file(self) -> str:
        spec = importlib.util.find_spec(self.name)
        return spec.origin if spec and spec.origin else self.name

    def describe(self) -> str:
        head = self.name if self.kind == "script" else f"-m {self.name}"
        return " ".join([head, *self.args])


def parse_target(words: list[str], module: str | None = None) -> Target:
    """Turn ``SCRIPT.py ARGS``, ``-m MODULE ARGS`` or ``python SCRIPT.py ARGS`` into a Target."""
    words = list(words)
    if words and words[0] == "--":
        words = words[1:]
    if (words and os.path.basename(words[0]) in ("python", "python3")) or (
        words and os.path.basename(words[0]).startswith("python3.")
    ):
        words = words[1:]
        if len(words) >= 2 and words[0] == "-m":
            module, words = words[1], words[2:]
    if module is not None:
        if not _module_exists(module):
            raise UserError(f"no module named '{module}' (is it installed, or are you in the right directory?)")
        if _package_without_main(module):  # python's own words, and its exit code
            raise UserError(
                f"No module named {module}.__main__; '{module}' is a package and cannot be directly executed", code=1
            )
        return Target("module", module, words)
    if not words:
        raise UserError("no training script given (usage: supplyline doctor train.py [ARGS...])")
    path = words[0]
    if not os.path.isfile(path):
        raise UserError(f"no such script: {path}")
    try:
        with open(path, "rb") as fh:
            compile(fh.read(), path, "exec")
    except SyntaxError as exc:
        raise UserError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from exc
    return Target("script", os.path.abspath(path), words[1:])


def _module_exists(module: str) -> bool:
    # `python -m` looks in the working directory first; so do we.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _package_without_main(module: str) -> bool:
    """A package ``python -m`` cannot run. Looked up on disk, not imported: the package's own
    ``__init__`` must run under the doctor's hooks, as part of the job."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    locations = list(spec.submodule_search_locations or []) if spec else []
    if spec is None or not locations:
        return False  # a plain module
    return not any(
        os.path.exists(os.path.join(d, name)) for d in locations for name in ("__main__.py", "__main__.pyc")
    ) and not _main_in_archive(spec)


def _main_in_archive(spec: importlib.machinery.ModuleSpec) -> bool:
    """A package inside a zip (or another loader): ask the loader, as runpy would, without importing."""
    if isinstance(spec.loader, importlib.machinery.SourceFileLoader):
        return False
    try:
        return importlib.util.find_spec(f"{spec.name}.__main__") is not None
    except (ImportError, ValueError):
        return True  # cannot tell: let runpy decide


@dataclass
class Outcome:
    exit_code: int
    reason: str  # completed | stopped | exception | sys_exit | interrupted
    exception_type: str | None = None
    exception_message: str | None = None
    traceback_text: str | None = None
    exc: BaseException | None = None


def run_target(target: Target, on_stop: Callable[[], None] | None = None) -> Outcome:
    """Run the target to its end and report how it ended; never lets its exception escape.

    The caller decides what to do with ``Outcome.exc`` (print the script's own traceback and
    keep its exit code).
    """
    saved_argv = sys.argv[:]
    sys.argv = target.argv
    path0 = os.path.dirname(target.name) if target.kind == "script" else os.getcwd()
    sys.path.insert(0, path0)
    try:
        if target.kind == "script":
            runpy.run_path(target.name, run_name="__main__")
        else:
            runpy.run_module(target.name, run_name="__main__", alter_sys=True)
        return Outcome(0, "completed")
    except StopTraining:
        return Outcome(0, "stopped")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return Outcome(0, "sys_exit")
        if isinstance(code, int):
            return Outcome(code, "sys_exit", exc=exc)
        return Outcome(1, "sys_exit", exception_message=str(code), exc=exc)
    except KeyboardInterrupt as exc:
        return Outcome(130, "interrupted", "KeyboardInterrupt", "", _script_traceback(exc), exc)
    except BaseException as exc:  # the script's own crash: reported, then shown as python would
        return Outcome(1, "exception", type(exc).__name__, str(exc), _script_traceback(exc), exc)
    finally:
        sys.argv = saved_argv
        try:
            sys.path.remove(path0)
        except ValueError:  # the script removed it itself
            pass


def _script_traceback(exc: BaseException) -> str:
    """The traceback as python would print it, minus supplyline's and runpy's own frames: the runner's
    frames at the top, and our hooks' wrappers (``__next__``, ``backward``...) in the middle of the
    user's stack, of this exception and of the ones chained to it."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    _trim(te, set())
    return "".join(te.format())


def _trim(te: traceback.TracebackException, seen: set[int]) -> None:
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if not _is_ours(f.filename)])
    for chained in (te.__cause__, te.__context__, *(getattr(te, "exceptions", None) or [])):
        if chained is not None:
            _trim(chained, seen)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _is_ours(filename: str) -> bool:
    # Python 3.11+ can run runpy frozen, named "<frozen runpy>".
    return (
        filename == "<frozen runpy>"
        or os.path.basename(filename) == "runpy.py"
        or os.path.abspath(filename).startswith(_PACKAGE_DIR)
    )
