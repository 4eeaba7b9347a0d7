"""Watch the memory of a DataLoader's worker processes, and stop them past a limit."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import psutil


def _footprint(proc: psutil.Process) -> tuple[int, int]:
    """(RSS, PSS) in bytes. PSS splits pages shared between processes among the sharers, so a
    sum over forked workers does not count the parent's pages once per worker the way RSS does;
    where PSS is unavailable (not Linux) it falls back to RSS."""
    try:
        full = proc.memory_full_info()
        return full.rss, getattr(full, "pss", full.rss)
    except psutil.AccessDenied:
        rss = proc.memory_info().rss
        return rss, rss


class WorkerMemoryWatch:
    """Samples the workers' memory from a background thread (psutil, every ``interval_s``).

    Past ``limit_bytes`` of the workers' total PSS it kills the workers: the main thread's next()
    then fails at once instead of the machine swapping, and the configuration is reported as
    stopped for memory.
    """

    def __init__(self, limit_bytes: int | None, interval_s: float = 0.2) -> None:
        self.limit_bytes = limit_bytes
        self.interval_s = interval_s
        self.peak_rss_total_bytes = 0
        self.peak_pss_total_bytes = 0
        self.peak_worker_rss_bytes = 0
        self.exceeded_bytes: int | None = None
        self._pids: list[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="supplyline-tune-memory", daemon=True)
        self._thread.start()

    def attach(self, iterator: Any) -> None:
        """Follow the workers of a DataLoader iterator (none for num_workers=0)."""
        workers = getattr(iterator, "_workers", None) or []
        with self._lock:
            self._pids = [w.pid for w in workers if w.pid]
        self.sample()

    def sample(self) -> None:
        with self._lock:
            pids = list(self._pids)
        rss_total = pss_total = 0
        for pid in pids:
            try:
                rss, pss = _footprint(psutil.Process(pid))
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            rss_total += rss
            pss_total += pss
            self.peak_worker_rss_bytes = max(self.peak_worker_rss_bytes, rss)
        self.peak_rss_total_bytes = max(self.peak_rss_total_bytes, rss_total)
        self.peak_pss_total_bytes = max(self.peak_pss_total_bytes, pss_total)
        if self.limit_bytes is not None and pss_total > self.limit_bytes and self.exceeded_bytes is None:
            self.exceeded_bytes = pss_total
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
