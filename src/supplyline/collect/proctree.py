"""The watched process tree: one PID and all its descendants (a trainer and its DataLoader workers).

Finding descendants is the expensive part with psutil (``children(recursive=True)`` reads every
process on the host, ~1.3-2.7 ms here), so there the member list is refreshed only every
``refresh_children_s``; in between, each sample reads just the known members. The procfs backend
finds them in ~20 µs and looks on every read.

Two backends give the same figures. ``procfs`` (Linux) reads ``/proc/PID/stat`` and
``/proc/PID/io`` directly and finds children through ``/proc/PID/task/TID/children``, which costs
in proportion to the tree rather than to the host; ``psutil`` serves everywhere else, with cached
``psutil.Process`` objects read under ``oneshot()``. ``benchmarks/monitor_overhead.py`` compares them.
Processes that vanish between two reads are dropped silently.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple, Protocol

import psutil

from supplyline.collect.procfs import find_int, read_or_none
from supplyline.collect.samples import ProcessSample


class ProcessReading(NamedTuple):
    """Cumulative counters of one process at one instant (a tuple: built 5x per sample, kept cheap)."""

    ppid: int
    name: str
    status: str
    cpu_s: float  # user + system CPU seconds since the process started
    rss_bytes: int
    read_bytes: int | None  # storage-layer bytes; None where /proc/PID/io is not readable
    write_bytes: int | None
    start_unix_s: float  # tells a reused PID from the process we knew


class Backend(Protocol):
    def read(self, pid: int) -> ProcessReading | None: ...  # None: the process is gone
    def descendants(self, pid: int) -> list[int]: ...  # children, grandchildren, ...


_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "disk-sleep",
    "Z": "zombie",
    "T": "stopped",
    "t": "tracing-stop",
    "X": "dead",
    "I": "idle",
    "W": "waking",
    "P": "parked",
}


class ProcfsBackend:
    """Linux: two small files per process; children from the per-thread ``children`` files."""

    def __init__(self) -> None:
        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._boot_unix_s = psutil.boot_time()

    @staticmethod
    def usable() -> bool:
        return os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")

    def read(self, pid: int) -> ProcessReading | None:
        stat = read_or_none(f"/proc/{pid}/stat")
        if stat is None:
            return None
        # The name sits in parentheses and may itself hold spaces or ')': split at the last one.
        head, _, tail = stat.rpartition(b")")
        f = tail.split()
        io = read_or_none(f"/proc/{pid}/io")
        read_bytes = None if io is None else find_int(io, b"read_bytes:")
        write_bytes = None if io is None else find_int(io, b"write_bytes:")
        return ProcessReading(
            ppid=int(f[1]),
            name=head.partition(b"(")[2].decode(errors="replace"),
            status=_STATES.get(f[0].decode(), f[0].decode()),
            cpu_s=(int(f[11]) + int(f[12])) / self._ticks,
            rss_bytes=int(f[21]) * self._page,
            read_bytes=read_bytes,
            write_bytes=write_bytes,
            start_unix_s=self._boot_unix_s + int(f[19]) / self._ticks,
        )

    def descendants(self, pid: int) -> list[int]:
        found: list[int] = []
        queue, seen = [pid], {pid}
        while queue:
            for kid in self._children(queue.pop()):
                if kid not in seen:
                    seen.add(kid)
                    found.append(kid)
                    queue.append(kid)
        return found

    @staticmethod
    def _children(pid: int) -> list[int]:
        # Each thread lists the children it forked; DataLoader workers are usually the main
        # thread's, but a helper thread may fork too, so every thread is read.
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return []
        kids: list[int] = []
        for tid in tids:
            data = read_or_none(f"/proc/{pid}/task/{tid}/children")
            if data:
                kids.extend(int(x) for x in data.split())
        return kids


class PsutilBackend:
    """Portable: cached ``psutil.Process`` objects, each read under one ``oneshot()``."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def _process(self, pid: int) -> psutil.Process:
        proc = self._procs.get(pid)
        if proc is None:
            proc = self._procs[pid] = psutil.Process(pid)
        return proc

    def read(self, pid: int) -> ProcessReading | None:
        try:
            proc = self._process(pid)
            with proc.oneshot():
                times = proc.cpu_times()
                try:
                    io = proc.io_counters()
                    read_bytes: int | None = int(io.read_bytes)
                    write_bytes: int | None = int(io.write_bytes)
                except (psutil.AccessDenied, AttributeError, NotImplementedError):
                    read_bytes = write_bytes = None
                return ProcessReading(
                    ppid=proc.ppid(),
                    name=proc.name(),
                    status=proc.status(),
                    cpu_s=times.user + times.system,
                    rss_bytes=proc.memory_info().rss,
                    read_bytes=read_bytes,
                    write_bytes=write_bytes,
                    start_unix_s=proc.create_time(),
                )
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            self._procs.pop(pid, None)
            return None

    def descendants(self, pid: int) -> list[int]:
        # One recursive call: it reads every process on the host once, whatever the tree's depth.
        try:
            kids = self._process(pid).children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return []
        for kid in kids:  # keep the objects: later reads reuse them (and their cached name)
            self._procs.setdefault(kid.pid, kid)
        return [kid.pid for kid in kids]


class ProcessTree:
    """Samples ``root_pid`` and its descendants; ``root_alive`` turns False once the root exits."""

    def __init__(self, root_pid: int, refresh_children_s: float = 2.0, backend: str = "auto") -> None:
        self.root_pid = root_pid
        self.refresh_children_s = refresh_children_s
        if backend == "auto":
            backend = "procfs" if ProcfsBackend.usable() else "psutil"
        self.backend_name = backend
        self._backend: Backend = ProcfsBackend() if backend == "procfs" else PsutilBackend()
        if backend == "procfs":
            # Finding children costs ~20 µs here (a few small files per thread), so every read looks:
            # DataLoader workers forked just after a 2 s refresh were otherwise missed by every sample
            # of a 2-second observed window, and their stall read "not measured".
            self.refresh_children_s = 0.0
        self._members: list[int] = [root_pid]
        self._last_refresh = float("-inf")
        self._prev: dict[int, tuple[float, ProcessReading]] = {}
        self.root_alive = True

    def _refresh_members(self) -> None:
        self._members = [self.root_pid, *self._backend.descendants(self.root_pid)]

    def read(self) -> list[ProcessSample]:
        """One sample per live member. Rates are over the time since the previous read; a process
        seen for the first time gets its averages since it started."""
        now = time.monotonic()
        if now - self._last_refresh >= self.refresh_children_s:
            self._refresh_members()
            self._last_refresh = now
        now_unix = time.time()
        samples: list[ProcessSample] = []
        alive: dict[int, tuple[float, ProcessReading]] = {}
        for pid in self._members:
            reading = self._backend.read(pid)
            if reading is None:
                continue
            prev = self._prev.get(pid)
            if prev is not None and prev[1].start_unix_s == reading.start_unix_s:
                dt, base = now - prev[0], prev[1]
            else:  # new to us (or a reused PID): average over its life so far
                dt, base = max(now_unix - reading.start_unix_s, 1e-3), None
            alive[pid] = (now, reading)
            samples.append(_sample(pid, reading, base, dt, "root" if pid == self.root_pid else "child"))
        self._prev = alive
        self._members = [pid for pid in self._members if pid in alive]
        root = alive.get(self.root_pid)
        self.root_alive = root is not None and root[1].status not in ("zombie", "dead")
        return samples


def _sample(pid: int, now: ProcessReading, base: ProcessReading | None, dt: float, role: str) -> ProcessSample:
    def rate(after: float | None, before: float | None) -> float | None:
        if after is None:
            return None
        return max(0.0, after - (before or 0.0)) / dt if dt > 0 else 0.0

    cpu = rate(now.cpu_s, base.cpu_s if base else 0.0) or 0.0
    return ProcessSample(
        pid=pid,
        ppid=now.ppid,
        name=now.name,
        role=role,
        cpu_pct=100.0 * cpu,
        rss_bytes=now.rss_bytes,
        status=now.status,
        read_bytes_per_s=rate(now.read_bytes, base.read_bytes if base else 0),
        write_bytes_per_s=rate(now.write_bytes, base.write_bytes if base else 0),
    )
