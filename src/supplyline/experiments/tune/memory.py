"""Watch the RSS of a DataLoader's worker processes, and stop them past a limit."""
from __future__ import annotations

import os
import signal
import threading
from typing import Any

import psutil


class WorkerMemoryWatch:
    """Samples the workers' RSS from a background thread (psutil, every ``interval_s``).

    Past ``limit_bytes`` it kills the workers: the main thread's next() then fails at once instead
    of the machine swapping, and the configuration is reported as stopped for memory.
    RSS counts pages a forked worker shares with its parent, so the total over-states what the
    workers add: a conservative limit.
    """

    def __init__(self, limit_bytes: int | None, interval_s: float = 0.2) -> None:
        self.limit_bytes = limit_bytes
        self.interval_s = interval_s
        self.peak_total_bytes = 0
        self.peak_worker_bytes = 0
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
        total = 0
        for pid in pids:
            try:
                rss = psutil.Process(pid).memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            total += rss
            self.peak_worker_bytes = max(self.peak_worker_bytes, rss)
        self.peak_total_bytes = max(self.peak_total_bytes, total)
        if self.limit_bytes is not None and total > self.limit_bytes and self.exceeded_bytes is None:
            self.exceeded_bytes = total
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
