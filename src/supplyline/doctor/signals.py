"""SIGTERM and ``os._exit`` around a doctor run: the diagnosis is written before the process ends.

SIGTERM (a scheduler's time limit, a preemption, torchrun stopping the other ranks when one fails)
would kill the process with nothing written. While the script runs, the guard turns the first
SIGTERM into ``Terminated`` in the main thread, so the script unwinds as from an interrupt and its
outcome is recorded. While the record is being written, a SIGTERM is only noted: interrupting the
write would lose it. Once the files are written the process ends as SIGTERM would have ended it
(killed by the signal: a shell sees 143, torchrun sees -15).

``os._exit(n)`` ends a process without unwinding; the guard replaces it while the script runs with
a function that first writes what was collected, then calls the real ``os._exit(n)``. Both act only in
this process (and ``os._exit`` in its main thread): a forked DataLoader worker inherits the handler
and the patched function, and must end exactly as before (a scheduler signals the whole group).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from supplyline.doctor.ranks import Terminated


class SigtermGuard:
    def __init__(self) -> None:
        self.received = False
        self._raising = False
        self._installed = False
        self._previous: Any = None
        self._pid = os.getpid()

    def install(self) -> None:
        try:
            self._previous = signal.signal(signal.SIGTERM, self._handler)
        except ValueError:  # not the main thread (a notebook's worker thread): leave signals alone
            return
        self._installed = True
        self._raising = True

    def stop_raising(self) -> None:
        """The script has ended: from now on a SIGTERM is noted, not raised into our own writing."""
        self._raising = False

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._pid:  # a forked DataLoader worker inherited us: die as it would have
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.received = True
        if self._raising:
            self._raising = False  # one exception at most: a second SIGTERM must not hit the unwinding
            quiet_workers()  # the group's workers die of the same signal: no error about it while unwinding
            raise Terminated("stopped by SIGTERM (a scheduler's time limit, or torchrun after another rank failed)")

    def uninstall(self) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    def exit_as_terminated(self) -> None:
        """End the process as the SIGTERM would have: killed by the signal, so callers see it as such."""
        self.uninstall()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed pipe: nothing more to say anyway
                pass
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def quiet_workers() -> None:
    """Once the script has ended, a DataLoader worker dying (the scheduler signals the whole group)
    must not raise into our writing: torch's SIGCHLD handler, left installed by the script's
    DataLoader, raises "DataLoader worker is killed" in the main thread at any bytecode."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except (ValueError, AttributeError):  # not the main thread; no SIGCHLD on this platform
        pass


class HardExitHook:
    """``os._exit`` replaced while the script runs: ``on_exit(code)`` first, then the real exit."""

    def __init__(self, on_exit: Callable[[int], None]) -> None:
        self.on_exit = on_exit
        self.pid = os.getpid()
        self.original = os._exit
        self._fired = False

    def install(self) -> None:
        os._exit = self._exit  # type: ignore[assignment]  # typeshed's NoReturn; ours ends the process too

    def uninstall(self) -> None:
        if os._exit == self._exit:  # the script may have replaced it too: leave theirs alone
            os._exit = self.original

    def _exit(self, code: int) -> None:  # the signature of os._exit
        mine = os.getpid() == self.pid and threading.current_thread() is threading.main_thread()
        if mine and not self._fired:
            self._fired = True
            try:
                self.on_exit(code)
            except BaseException as exc:  # whatever happens, the script's exit happens
                _say(f"the report could not be written before os._exit({code}) ({type(exc).__name__}: {exc})")
        elif os.getpid() == self.pid and not self._fired:
            _say(f"os._exit({code}) called from a thread: the process ends at once, no report is written")
        self.original(code)


def _say(message: str) -> None:
    try:
        print(f"supplyline doctor: warning: {message}", file=sys.stderr, flush=True)
    except Exception:
        pass
