"""Timed reads: sequential, small files, metadata; cold and warm; with several thread counts.

Threads stand in for DataLoader workers: reads release the GIL, so N threads issue N reads at once,
which is what N workers do to the storage. One measurement ("cell") is one test × cache state ×
thread count; each stops when its item list is done or its time is up, whichever comes first.
"""
from __future__ import annotations

import itertools
import mmap
import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from supplyline.experiments.disk.cache import evict_all

SEGMENT = 32 << 20  # sequential work is handed out in 32 MiB pieces, so threads can share one file


@dataclass
class Cell:
    """One measurement. ``ops`` counts files read (small_files), pieces read (sequential) or
    stat+open calls (metadata, two per file)."""

    test: str  # "sequential" | "small_files" | "metadata"
    cache: str  # "cold" | "warm"
    threads: int
    seconds: float
    bytes: int
    ops: int
    cold_method: str | None  # "fadvise", "O_DIRECT", or "unverified" (pages could not be dropped)
    complete: bool  # False when interrupted part-way

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mb_per_s": round(self.mb_per_s, 1), "ops_per_s": round(self.ops_per_s, 1)}


class _Buffers(threading.local):
    """A page-aligned read buffer per thread (O_DIRECT needs alignment; anonymous mmap gives it)."""

    def __init__(self, block_size: int) -> None:
        self.buf = mmap.mmap(-1, block_size)
        self.view = memoryview(self.buf)


def _read_range(path: str, offset: int, length: int, buffers: _Buffers, direct: bool) -> int:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if direct else 0)
    fd = os.open(path, flags)
    try:
        done = 0
        while done < length:
            n = os.preadv(fd, [buffers.view], offset + done)
            if n <= 0:
                break
            done += min(n, length - done)
        return done
    finally:
        os.close(fd)


def _stat_open(path: str) -> int:
    os.stat(path)
    os.close(os.open(path, os.O_RDONLY))
    return 0


def run_cell(test: str, cache: str, items: Sequence[tuple[str, int, int]], threads: int, seconds: float,
             block_size: int, direct: bool = False, cold_method: str | None = None,
             stop: threading.Event | None = None) -> Cell:
    """Read ``items`` = (path, offset, length) with ``threads`` threads for at most ``seconds``.

    Ctrl-C while waiting stops the threads after their current item and re-raises, with the
    cell so far attached as ``exc.cell``.
    """
    stop = stop or threading.Event()
    next_index = itertools.count()  # next() on a count is atomic in CPython: threads share it safely
    totals: list[tuple[int, int]] = []
    lock = threading.Lock()
    buffers = _Buffers(block_size)
    deadline = time.perf_counter() + seconds

    def worker() -> None:
        got_bytes = got_ops = 0
        while not stop.is_set() and time.perf_counter() < deadline:
            i = next(next_index)
            if i >= len(items):
                break
            path, offset, length = items[i]
            try:
                if test == "metadata":
                    _stat_open(path)
                    got_ops += 2
                else:
                    got_bytes += _read_range(path, offset, length, buffers, direct)
                    got_ops += 1
            except OSError:
                continue  # a file that vanished or failed to read is not a rate
        with lock:
            totals.append((got_bytes, got_ops))

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    interrupted: KeyboardInterrupt | None = None
    while any(t.is_alive() for t in pool):
        try:
            for t in pool:
                t.join(0.05)
        except KeyboardInterrupt as exc:
            interrupted = exc
            stop.set()
    elapsed = time.perf_counter() - start
    cell = Cell(test, cache, threads, elapsed, sum(b for b, _ in totals), sum(o for _, o in totals),
                cold_method if cache == "cold" else None, interrupted is None)
    if interrupted is not None:
        interrupted.cell = cell  # type: ignore[attr-defined]
        raise interrupted
    return cell


def sequential_items(files: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """Large files cut into 32 MiB pieces, in file order: one thread reads them strictly in sequence."""
    return [(path, off, min(SEGMENT, size - off)) for path, size in files for off in range(0, size, SEGMENT)]


def whole_file_items(files: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    return [(path, 0, size) for path, size in files]


def direct_io_works(path: str, block_size: int) -> bool:
    """Whether ``path``'s file system accepts O_DIRECT reads (tmpfs and some FUSE ones do not)."""
    if not hasattr(os, "O_DIRECT"):
        return False
    try:
        _read_range(path, 0, min(block_size, 4096), _Buffers(block_size), direct=True)
        return True
    except OSError:
        return False


def make_cold(paths: list[str], block_size: int) -> tuple[bool, str]:
    """Evict ``paths``; returns (use O_DIRECT, method name) for the cold measurement that follows."""
    if evict_all(paths) >= 0.99:
        return False, "fadvise"
    if paths and direct_io_works(paths[0], block_size):
        return True, "O_DIRECT"
    return False, "unverified"


def warm_up(items: Sequence[tuple[str, int, int]], block_size: int) -> None:
    """Read ``items`` once (not timed) so the warm cell reads from the page cache only."""
    buffers = _Buffers(block_size)
    for path, offset, length in items:
        try:
            _read_range(path, offset, length, buffers, direct=False)
        except OSError:
            pass


ProgressFn = Callable[[str], None]


def measure_test(test: str, items: list[tuple[str, int, int]], thread_counts: list[int], seconds: float,
                 block_size: int, cells: list[Cell], progress: ProgressFn) -> None:
    """Cold then warm cells for each thread count, appended to ``cells`` as they finish (so an
    interrupt keeps every finished one)."""
    paths = sorted({p for p, _, _ in items})
    for threads in thread_counts:
        for cache in ("cold", "warm"):
            if test == "metadata" and cache == "cold":
                continue  # cold dentry/inode caches need root-only, machine-wide drop_caches
            progress(f"{test.replace('_', ' ')} {cache}, {threads} thread{'s' if threads > 1 else ''}")
            if cache == "cold":
                direct, method = make_cold(paths, block_size)
            else:
                direct, method = False, None
                if test != "metadata":
                    warm_up(items, block_size)
            try:
                cells.append(run_cell(test, cache, items, threads, seconds, block_size, direct, method))
            except KeyboardInterrupt as exc:
                cells.append(exc.cell)  # type: ignore[attr-defined]
                raise

