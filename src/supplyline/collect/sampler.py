"""``Monitor``: samples the host, the GPUs and a process tree on a daemon thread.

    with Monitor(interval=1.0, log="samples.jsonl") as mon:
        train()
    print(mon.summary()["cpu.busy_pct"].p95)

Each sample is appended to ``monitor.samples`` and, when a log is given, written as one JSON line
and flushed at once, so a crash loses at most the sample being taken. The sampling thread never
raises into the caller: an internal error becomes one ``RuntimeWarning`` and sampling goes on.
"""

from __future__ import annotations

import csv
import json
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import IO, Any

from supplyline.cli_types import DAY_S
from supplyline.collect.gpu import GpuReader
from supplyline.collect.host import CpuReader, DiskReader, MemoryReader
from supplyline.collect.proctree import ProcessTree
from supplyline.collect.samples import Sample, flatten
from supplyline.collect.summary import Summary, summarize
from supplyline.errors import UserError


def open_for_writing(path: str) -> IO[str]:
    """Open a log for writing (truncating it), or raise a one-line UserError naming the path."""
    try:
        return open(path, "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc


class Monitor:
    """Samples every ``interval`` seconds between ``start()`` and ``stop()`` (or a ``with`` block).

    ``pid``: root of the watched process tree (None: this process). ``log``: JSONL file, one sample
    a line. ``csv``: the same as flat columns (host metrics and tree totals). ``gpu=False`` skips
    NVML; ``tree=False`` watches the host only. ``on_sample`` is called on the sampling thread after each sample (keep it cheap).
    """

    def __init__(
        self,
        interval: float = 1.0,
        log: str | None = "samples.jsonl",
        pid: int | None = None,
        csv: str | None = None,
        gpu: bool = True,
        tree: bool = True,
        refresh_children_s: float = 2.0,
        process_backend: str = "auto",
        on_sample: Callable[[Sample], None] | None = None,
    ) -> None:
        if not 0 < interval <= DAY_S:  # also refuses NaN; inf and 1e10 overflow the timed wait
            raise UserError(f"interval must be more than 0 and at most {DAY_S:g} seconds, got {interval}")
        self.interval = float(interval)
        self.log_path = log
        self.csv_path = csv
        self.pid = os.getpid() if pid is None else int(pid)
        self.samples: list[Sample] = []
        self.sampler_cpu_s = 0.0  # CPU time the sampling thread spent, for the overhead figures
        self.prime_cpu_s = 0.0  # of which the one-off baseline read at start
        self.errors = 0
        self.gpu: GpuReader | None = None
        self._want_gpu = gpu
        self._want_tree = tree
        self._refresh_children_s = refresh_children_s
        self._process_backend = process_backend
        self._on_sample = on_sample
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._log: IO[str] | None = None
        # A log that cannot be written: the reason, and whether to warn about it here (the doctor
        # names it with its other files instead).
        self.log_error: str | None = None
        self.report_log_errors = True
        self._csv_file: IO[str] | None = None
        self._csv: Any = None
        self._csv_columns: list[str] = []
        self._t0 = 0.0
        self._tree: ProcessTree | None = None
        self._last_sample_at = 0.0

    @property
    def sample_count(self) -> int:
        return len(self.samples)

    @property
    def gpu_status(self) -> str:
        """'' when GPUs are read; otherwise the one line that says why not."""
        if self.gpu is None:
            return "GPU not sampled" if not self._want_gpu else ""
        return "" if self.gpu.available else self.gpu.reason

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def tree_alive(self) -> bool:
        """False once the watched root process has exited."""
        return self._tree.root_alive if self._tree is not None else True

    def start(self) -> Monitor:
        if self._thread is not None:
            raise RuntimeError("a Monitor starts once")
        self._log = open_for_writing(self.log_path) if self.log_path else None
        try:
            self._csv_file = open_for_writing(self.csv_path) if self.csv_path else None
        except UserError:
            self._close_files()
            raise
        self._cpu, self._memory, self._disks = CpuReader(), MemoryReader(), DiskReader()
        self._tree = ProcessTree(self.pid, self._refresh_children_s, self._process_backend) if self._want_tree else None
        self.gpu = GpuReader() if self._want_gpu else None
        self._t0 = time.time()
        self._thread = threading.Thread(target=self._run, name="supplyline-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Monitor:
        """Stop sampling and close the logs; safe to call twice."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._close_files()
        if self.gpu is not None:
            self.gpu.close()
        return self

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def summary(self) -> Summary:
        return summarize(list(self.samples))

    def _run(self) -> None:
        self._guarded(self._prime)
        self.prime_cpu_s = self.sampler_cpu_s
        self._last_sample_at = time.monotonic()
        next_at = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            self._guarded(self._take_sample)
            next_at += self.interval
            now = time.monotonic()
            if next_at < now:  # fell behind (suspended, overloaded): skip, do not burst
                next_at = now + self.interval
        # A last sample at stop, so that a short job (or the tail of a long one) is not lost.
        if time.monotonic() - self._last_sample_at >= self.interval / 4:
            self._guarded(self._take_sample)

    def _guarded(self, step: Callable[[], None]) -> None:
        began = time.thread_time()
        try:
            step()
        except Exception as exc:  # the caller's training must never die of its monitor
            self.errors += 1
            if self.errors == 1:
                warnings.warn(
                    f"supplyline monitor: sampling failed ({type(exc).__name__}: {exc}); "
                    "later failures are not reported",
                    RuntimeWarning,
                    stacklevel=1,
                )
        finally:
            self.sampler_cpu_s += time.thread_time() - began

    def _prime(self) -> None:
        # Counters need a baseline: the first real sample is one interval after start().
        self._cpu.read()
        self._memory.read()
        self._disks.read()
        if self._tree is not None:
            self._tree.read()

    def _take_sample(self) -> None:
        now = time.time()
        self._last_sample_at = time.monotonic()
        cpu, memory, disks = self._cpu.read(), self._memory.read(), self._disks.read()
        if cpu is None or memory is None or disks is None:
            return
        sample = Sample(
            time_unix_s=now,
            elapsed_s=now - self._t0,
            cpu=cpu,
            memory=memory,
            disks=disks,
            gpus=self.gpu.read() if self.gpu is not None else [],
            processes=self._tree.read() if self._tree is not None else [],
        )
        try:
            self._write(sample)  # first, so the log is never behind monitor.samples
        except OSError as exc:  # a full disk: stop logging, keep sampling in memory
            self.log_error = f"{os.path.basename(self.log_path or self.csv_path or 'log')}: {exc.strerror or exc}"
            self._close_files()
            if self.report_log_errors:
                raise
        finally:
            self.samples.append(sample)  # kept even when the log's disk is full
        if self._on_sample is not None:
            self._on_sample(sample)

    def _write(self, sample: Sample) -> None:
        if self._log is not None:
            self._log.write(json.dumps(sample.to_dict(), separators=(",", ":")) + "\n")
            self._log.flush()
        if self._csv_file is not None:
            row = {"time_unix_s": sample.time_unix_s, "elapsed_s": sample.elapsed_s, **flatten(sample)}
            if self._csv is None:
                # Columns are fixed by the first sample; a GPU or disk appearing later is left out.
                self._csv_columns = list(row)
                self._csv = csv.DictWriter(
                    self._csv_file, fieldnames=self._csv_columns, extrasaction="ignore", restval=""
                )
                self._csv.writeheader()
            self._csv.writerow(row)
            self._csv_file.flush()

    def _close_files(self) -> None:
        for fh in (self._log, self._csv_file):
            if fh is not None:
                try:
                    fh.close()
                except OSError:
                    pass
        self._log = self._csv_file = None
