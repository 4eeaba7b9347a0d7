"""What the framework callbacks share: a DoctorSession whose steps are the framework's own.

The torch hooks still measure data wait, logging, checkpoints and copies inside each step; only
the step boundaries come from the framework (StepClock.external). The what-if phases are not run:
they replay and drain the DataLoader from inside its iterator, which would alter the framework's
loop. A step limit asks the framework to stop through its own flag, never by raising.
"""

from __future__ import annotations

import atexit
import os
import sys
import traceback
from typing import TYPE_CHECKING, Any

from supplyline.record import RunRecord, TargetInfo

if TYPE_CHECKING:
    from supplyline.analyze.report import Report


class CallbackCore:
    def __init__(self, framework: str, out: str, steps: int | None, quiet: bool) -> None:
        if steps is not None and steps < 1:
            raise ValueError("steps must be at least 1")
        self.framework = framework
        self.out = os.path.abspath(out)
        self.steps = steps
        self.quiet = quiet
        self.session: Any = None
        self.record: RunRecord | None = None
        self.report: Report | None = None

    @property
    def active(self) -> bool:
        return self.session is not None

    def begin(self) -> None:
        """Called on the training thread when training starts (the clock keeps that thread)."""
        if self.session is not None:
            return
        from supplyline.doctor.options import DoctorOptions
        from supplyline.doctor.session import DoctorSession

        argv = sys.argv or [""]
        target = TargetInfo("library", os.path.abspath(argv[0]) if argv[0] else self.framework, argv[1:], os.getcwd())
        session = DoctorSession(target, self.out, DoctorOptions(what_if=False))
        session.whatif.note = f"not run under the {self.framework} callback (it would alter the framework's loop)"
        session.notes.append(f"step boundaries come from {self.framework}'s callbacks")
        session.clock.external = True
        session.start()
        self.session = session
        # A framework without an exception callback (the HF Trainer) may never call ``end``:
        # at exit the hooks still come off and what was measured is still written.
        atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        if self.session is not None:
            self.end(RuntimeError(f"the process exited before {self.framework} ended training"))

    def boundary(self) -> bool:
        """One framework step ended; returns True when the step limit is reached."""
        if self.session is None:
            return False
        clock = self.session.clock
        clock.external_boundary()
        return self.steps is not None and clock.step_count >= self.steps

    def pause(self) -> None:
        if self.session is not None:
            self.session.clock.external_pause()

    def end(self, exc: BaseException | None = None) -> None:
        if self.session is None:
            return
        from supplyline.doctor.output import write_outputs
        from supplyline.launch import Outcome

        session, self.session = self.session, None
        atexit.unregister(self._at_exit)
        if exc is None:
            limit = self.steps is not None and session.clock.step_count >= self.steps
            outcome = Outcome(0, "stopped" if limit else "completed")
            if limit:
                session.stop_message = f"stopped after {self.steps} steps"
        else:
            outcome = Outcome(1, "exception", type(exc).__name__, str(exc), "".join(traceback.format_exception(exc)))
        self.record = session.stop(outcome)
        self.report = write_outputs(self.record, self.out, quiet=self.quiet)
