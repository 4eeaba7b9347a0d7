"""How long the OS kept a thread waiting for a CPU, from Linux's per-thread schedstat.

On a busy machine a stage's wall time includes the time other programs held the cores; that
wait says nothing about the stage. ``/proc/self/task/<tid>/schedstat`` holds the thread's ns
running and ns runnable-but-waiting, so wall time minus the waiting delta is the stage's own time
(CPU, I/O and GIL waits stay in). Elsewhere the wait reads as 0 and times stay wall times.
"""

from __future__ import annotations

import os
import threading

_local = threading.local()


def _path() -> str:
    return f"/proc/self/task/{threading.get_native_id()}/schedstat"


def read(path_or_fd: str | int) -> tuple[int, int] | None:
    """(ns running, ns waiting for a CPU) from a schedstat path or open descriptor; None if unreadable."""
    try:
        if isinstance(path_or_fd, int):
            raw = os.pread(path_or_fd, 64, 0)
        else:
            with open(path_or_fd, "rb") as fh:
                raw = fh.read(64)
        running, waiting = raw.split()[:2]
        return int(running), int(waiting)
    except (OSError, ValueError):
        return None


def thread_sched() -> tuple[int, int] | None:
    """schedstat of the calling thread, opening it once per thread (pread of an open fd costs ~2 µs)."""
    return read(_path())


def queue_wait_ns() -> int:
    """Cumulative ns the calling thread waited for a CPU; 0 where schedstat is unavailable.

    The descriptor is cached per thread and per process (a forked child must not read its parent's).
    """
    cached = getattr(_local, "fd", None)
    if cached is None or cached[0] != os.getpid():
        try:
            cached = (os.getpid(), os.open(_path(), os.O_RDONLY))
        except OSError:
            cached = (os.getpid(), -1)
        _local.fd = cached
    if cached[1] < 0:
        return 0
    stat = read(cached[1])
    return stat[1] if stat else 0
