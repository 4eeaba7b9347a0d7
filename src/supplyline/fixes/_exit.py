"""Run clean-up callbacks on every way a training process ends: normal exit, an uncaught
exception, and SIGTERM (what schedulers and `kill` send).

Both async logging and async checkpoints need this: a queued log line or an in-flight
checkpoint is lost if the process ends before the background thread drains it. One shared
registry keeps the order predictable (last registered runs first, like ``atexit``) and
installs a single SIGTERM handler however many helpers are in use.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

# Re-entrant: the SIGTERM handler runs on the main thread and may interrupt it inside register().
_lock = threading.RLock()
_callbacks: list[Callable[[], None]] = []
_atexit_installed = False
_sigterm_installed = False
_previous_sigterm: Any = signal.SIG_DFL
_failed: list[str] = []  # why the process must not exit 0, said by a callback at exit


def register(callback: Callable[[], None]) -> None:
    """Call ``callback`` once when the process ends: normal exit, exception or SIGTERM."""
    global _atexit_installed
    with _lock:
        if callback not in _callbacks:
            _callbacks.append(callback)
        if not _atexit_installed:
            atexit.register(_at_interpreter_exit)
            _atexit_installed = True
    _install_sigterm()


def fail_exit(reason: str) -> None:
    """From a callback at exit: the process must end with a non-zero status (e.g. the final
    checkpoint was not written), even if the script itself ended normally."""
    _failed.append(reason)


def _at_interpreter_exit() -> None:
    """The atexit hook: run the callbacks, then turn a clean exit into status 1 if one failed.

    atexit cannot change the exit status, so the only way is ``os._exit(1)`` once everything
    ours has run; logging is shut down and the standard streams flushed first, since os._exit
    skips the clean-up still to come. A script that already failed with an uncaught exception
    (``sys.last_value`` is set) keeps its own status 1 and clean-up. A script that called
    ``sys.exit(k)`` cannot be told apart from a clean end here and also exits 1.
    """
    run_all()
    if not _failed or hasattr(sys, "last_value"):
        return
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(1)


def unregister(callback: Callable[[], None]) -> None:
    with _lock:
        if callback in _callbacks:
            _callbacks.remove(callback)


def run_all() -> None:
    """Run and forget every registered callback, newest first; one failing does not stop the rest."""
    while True:
        with _lock:
            if not _callbacks:
                return
            callback = _callbacks.pop()
        _run_one(callback)


def _run_each_keeping_them() -> None:
    """Run every callback but keep them registered: the process may go on after SIGTERM."""
    with _lock:
        callbacks = list(reversed(_callbacks))
    for callback in callbacks:
        _run_one(callback)


def _run_one(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception as exc:  # an exit path must never raise over the user's own exit
        os.write(2, f"supplyline: clean-up at exit failed: {exc}\n".encode())


def _install_sigterm() -> None:
    """Install our SIGTERM handler once, remembering the one it replaces so we can chain it.

    Only the main thread may set signal handlers; elsewhere we rely on atexit alone. A SIGTERM
    the program already ignores stays ignored: that was the user's choice.
    """
    global _sigterm_installed, _previous_sigterm
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN:
        return
    _previous_sigterm = previous
    signal.signal(signal.SIGTERM, _on_sigterm)
    _sigterm_installed = True


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    previous = _previous_sigterm
    if callable(previous):
        # The program's own handler decides whether to end (often: set a flag, save, exit), so
        # flush now but stay registered for the real exit.
        _run_each_keeping_them()
        previous(signum, frame)
        return
    run_all()
    # No Python handler before us: end exactly as the default action would, killed by SIGTERM,
    # so the parent (shell, scheduler) sees the conventional status 128 + 15 = 143.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
