"""The doctor's modes and what the DataLoader hook does in each.

The hook in ``collect/torch_hooks.py`` knows nothing of modes: it asks ``Controller.serve`` for each
counted batch when one is set. The ``Schedule`` sets it on every mode change, so the observed steps
pay a single ``is None`` test per batch, and the what-if phases and the fix trials live here, beside
the session that decides when they start (``doctor/session.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum
from typing import Any

from supplyline import phases as P
from supplyline.collect.steps import StepClock
from supplyline.collect.torch_hooks import PASS, Controller
from supplyline.launch import StopTraining

Fetch = Callable[[Any], Any]  # the loader iterator's own __next__


class Mode(Enum):
    OBSERVE = "observe"  # the job runs as written; the hooks only time it
    REPLAY = "replay"  # what-if: the last batch is served again, with no data wait
    DRAIN = "drain"  # what-if: the loader is pulled alone, with no consumer, then the trial starts
    TRIAL = "trial"  # a fix trial: batches from its rebuilt loader, or the script's own as observed
    STOP = "stop"  # the doctor is done: the next fetch ends the job


class Schedule:
    """Owns the mode. ``drain`` runs the loader-only what-if on the first fetch in ``DRAIN`` (it may
    begin a fix trial); ``batch_source`` serves a trial's batches (None: the script's own pass)."""

    def __init__(self, ctl: Controller, clock: StepClock, drain: Callable[[Any, Fetch], None]) -> None:
        self.mode = Mode.OBSERVE
        self.batch_source: Callable[[Fetch], Any] | None = None
        # The script's own loader iterator in a fix trial's unchanged stretches: how many batches its
        # workers hold ready is read from it at each step's end (doctor/trials.py ``ready_batches``).
        self.script_iter: Any = None
        self._ctl, self._clock, self._drain = ctl, clock, drain

    def enter(self, mode: Mode) -> None:
        self.mode = mode
        if mode is not Mode.TRIAL:
            self.batch_source = None
        self._ctl.serve = None if mode is Mode.OBSERVE else self._serve

    def _serve(self, it: Any, original: Fetch) -> Any:
        if self.mode is Mode.REPLAY:
            self._clock.add_fetch(True, 0.0, 0.0)
            return self._ctl.last_batch
        if self.mode is Mode.DRAIN:
            self._drain(it, original)  # may begin a fix trial: the mode is read again below
        if self.mode is Mode.TRIAL:
            self.script_iter = it
            return PASS if self.batch_source is None else self._trial_fetch(self.batch_source, original)
        raise StopTraining()

    def _trial_fetch(self, source: Callable[[Fetch], Any], original: Fetch) -> Any:
        """A batch from the fix trial's loader, timed as the step's data wait."""
        clock = self._clock
        t = time.perf_counter()
        clock.depth, clock.phase = 1, P.DATA_WAIT
        try:
            return source(original)
        finally:
            clock.depth, clock.phase = 0, None
            clock.add_fetch(True, time.perf_counter() - t, 0.0)
