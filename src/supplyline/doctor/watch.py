"""``supplyline.watch()``: the doctor around a block of code in this process (a notebook cell, a loop).

The same DoctorSession, record and report files as ``supplyline doctor``; only the way the code
is started differs. What the block needs that a script run does not:

- **No signal handlers.** The CLI's SIGTERM guard and ``os._exit`` hook belong to a process it
  owns; a block runs inside someone else's (a Jupyter kernel owns SIGINT, and ``signal.signal``
  fails off the main thread), so nothing here touches signals.
- **Nothing read from ``sys.argv``.** In a kernel it is the kernel launcher's command line; the
  record names the block by the caller's ``name``, the ``__main__`` script, or the notebook.
- **Never harm the block.** If the doctor cannot attach, the block runs undiagnosed after one
  warning; if the report cannot be made, one warning, and the block's own exception (if any) is
  the one that propagates.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supplyline.doctor.options import DoctorOptions
from supplyline.launch import Outcome, StopTraining, _script_traceback
from supplyline.record import RunRecord, TargetInfo

if TYPE_CHECKING:
    from supplyline.analyze.report import Report
    from supplyline.doctor.session import DoctorSession


@dataclass
class Diagnosis:
    """What a watched block produced; shown inline by IPython (the report.html page and a text repr)."""

    out: str  # the report folder, absolute
    session: DoctorSession | None = None  # None when the doctor could not attach
    record: RunRecord | None = None  # set when the block has ended
    report: Report | None = None  # None until the block ends, or when the analysis failed
    written: bool = False  # report.html was written by this run (not a full disk, not a leftover)

    def _repr_html_(self) -> str | None:
        if self.report is None or self.record is None:
            return None  # IPython falls back to the text repr
        from supplyline.render.notebook import report_frame

        return report_frame(self.report, self.record)

    def __repr__(self) -> str:
        if self.report is None:
            state = "running" if self.session is not None and self.record is None else "no report"
            return f"<supplyline diagnosis: {state}; folder {self.out}>"
        from supplyline.render.notebook import report_text

        return report_text(self.report, self.out if self.written else None)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's text repr hook
        printer.text(repr(self))


def default_name() -> str:
    """The script this process runs, else the notebook (Jupyter names it in JPY_SESSION_NAME), else python."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if isinstance(main_file, str) and os.path.isfile(main_file):
        return os.path.abspath(main_file)
    return os.environ.get("JPY_SESSION_NAME") or ("notebook" if "ipykernel" in sys.modules else "python")


@contextlib.contextmanager
def watch(
    out: str = "supplyline-report",
    steps: int | None = None,
    seconds: float | None = None,
    what_if: bool = True,
    what_if_steps: int = 20,
    quiet: bool = False,
    try_fixes: bool = False,
    try_steps: int = 40,
    sample_hz: float = 25.0,
    name: str | None = None,
) -> Iterator[Diagnosis]:
    """Diagnose the block: ``with supplyline.watch(steps=200) as run: <training loop>``.

    Reaching ``steps``/``seconds`` ends the block early (the loop is interrupted at its next batch
    and execution resumes after the ``with``); the what-if phases and, with ``try_fixes``, the fix
    trial run first, as under ``supplyline doctor``. ``run.report`` is the typed Report afterwards,
    and ``run`` displays inline in a notebook.
    """
    result = Diagnosis(os.path.abspath(out))
    target = TargetInfo("library", name or default_name(), [], os.getcwd())
    options = DoctorOptions(
        steps=steps,
        seconds=seconds,
        what_if=what_if,
        what_if_steps=what_if_steps,
        sampler_interval_s=1.0 / sample_hz,
        try_fixes=try_fixes,
        try_steps=try_steps,
    )

    def new_session() -> DoctorSession:
        from supplyline.doctor.session import DoctorSession  # torch loads here, not at import

        session = DoctorSession(target, result.out, options)
        if options.trial_needs_a_limit:
            session.trials.note = "not run: the trial follows the observed steps, so it needs steps= or seconds="
        return session

    result.session = _attach(new_session)
    if result.session is None:
        yield result
        return
    outcome = Outcome(0, "completed")
    try:
        yield result
    except StopTraining:
        outcome = Outcome(0, "stopped")
    except KeyboardInterrupt as exc:
        outcome = Outcome(130, "interrupted", "KeyboardInterrupt", "", _script_traceback(exc))
        raise
    except BaseException as exc:
        outcome = Outcome(1, "exception", type(exc).__name__, str(exc), _script_traceback(exc))
        raise
    finally:
        _finish(result, outcome, quiet)


def _attach(new_session: Callable[[], DoctorSession]) -> DoctorSession | None:
    """A started session, or None after one warning: the block then runs as it would without us."""
    session = None
    try:
        session = new_session()
        session.start()
        return session
    except Exception as exc:  # never lose the user's block over our hooks
        if session is not None:
            _detach(session)
        _warn(f"could not attach to the job ({type(exc).__name__}: {exc}); running it without diagnosis")
        return None


def _detach(session: DoctorSession) -> None:
    for part in (session.hooks, session.collectives, session.syncs):
        with contextlib.suppress(Exception):
            part.uninstall()
    with contextlib.suppress(Exception):
        session.sampler.stop()
    with contextlib.suppress(Exception):
        if session.monitor is not None:
            session.monitor.stop()


def _finish(result: Diagnosis, outcome: Outcome, quiet: bool) -> None:
    """Stop the session and write the report; never raises (the block's own exception must win)."""
    session = result.session
    assert session is not None
    try:
        from supplyline.doctor.output import write_outputs
        from supplyline.render.notebook import in_kernel, show_inline

        result.record = session.stop(outcome)
        inline = not quiet and in_kernel()  # in a notebook the report shows under the cell instead
        result.report = write_outputs(result.record, result.out, quiet=quiet or inline, failures=session.log_failures)
        result.written = _written_since(os.path.join(result.out, "report.html"), session.t0_unix)
        for lost in session.trial.lost_saves:  # a checkpoint the block believes saved never reached the disk
            _say(f"error: {lost}")
        if inline and result.report is not None:
            show_inline(result)
    except Exception as exc:
        _detach(session)
        _warn(f"the report could not be written ({type(exc).__name__}: {exc})")


def _written_since(path: str, t0_unix: float) -> bool:
    try:
        return os.path.getmtime(path) >= t0_unix - 1.0  # a coarse file-system clock rounds down
    except OSError:
        return False


def _warn(message: str) -> None:
    _say(f"warning: {message}")


def _say(message: str) -> None:
    with contextlib.suppress(Exception):  # a closed stderr must not harm the block
        print(f"supplyline: {message}", file=sys.stderr, flush=True)
