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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from supplyline.storage.disk.cache import evict_all

SEGMENT = 32 << 20  # sequential work is handed out in 32 MiB pieces, so threads can share one file


@dataclass
class Cell:
    """One measurement. ``ops`` counts read calls of ``block_size`` (sequential), files read
    (small_files) or stat+open calls (metadata, two per file); ``items`` how many of the work list's
    files or file parts were started."""

    test: str  # "sequential" | "small_files" | "metadata"
    cache: str  # "cold" | "warm"
    threads: int
    seconds: float
    bytes: int
    ops: int
    cold_method: str | None  # "fadvise", "O_DIRECT", or "unverified" (pages could not be dropped)
    complete: bool  # False when interrupted part-way
    items: int = 0

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


def _read_range(
    path: str,
    offset: int,
    length: int,
    buffers: _Buffers,
    direct: bool,
    should_stop: Callable[[], bool] = lambda: False,
) -> tuple[int, int]:
    """Read ``length`` bytes from ``offset`` in block-size reads; (bytes, reads). Stops early
    when ``should_stop()`` says so (checked between reads, so a long file obeys the time limit)."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if direct else 0)
    fd = os.open(path, flags)
    try:
        done = reads = 0
        while done < length and not should_stop():
            n = os.preadv(fd, [buffers.view], offset + done)
            if n <= 0:
                break
            done += min(n, length - done)
            reads += 1
        return done, reads
    finally:
        os.close(fd)


def _stat_open(path: str) -> int:
    os.stat(path)
    os.close(os.open(path, os.O_RDONLY))
    return 0


def run_cell(
    test: str,
    cache: str,
    items: Sequence[tuple[str, int, int]],
    threads: int,
    seconds: float,
    block_size: int,
    direct: bool = False,
    cold_method: str | None = None,
    stop: threading.Event | None = None,
) -> Cell:
    """Read ``items`` = (path, offset, length) with ``threads`` threads for at most ``seconds``.

    Ctrl-C while waiting stops the threads after their current item and re-raises, with the
    cell so far attached as ``exc.cell``.
    """
    stop = stop or threading.Event()
    next_index = itertools.count()  # next() on a count is atomic in CPython: threads share it safely
    totals: list[tuple[int, int, int]] = []
    lock = threading.Lock()
    buffers = _Buffers(block_size)
    deadline = time.perf_counter() + seconds

    def should_stop() -> bool:
        return stop.is_set() or time.perf_counter() >= deadline

    def worker(finished: threading.Event) -> None:
        try:
            got_bytes = got_ops = started = 0
            while not should_stop():
                i = next(next_index)
                if i >= len(items):
                    break
                started = max(started, i + 1)
                path, offset, length = items[i]
                try:
                    if test == "metadata":
                        _stat_open(path)
                        got_ops += 2
                    else:
                        n, reads = _read_range(path, offset, length, buffers, direct, should_stop)
                        got_bytes += n
                        got_ops += reads if test == "sequential" else 1
                except OSError:
                    continue  # a file that vanished or failed to read is not a rate
            with lock:
                totals.append((got_bytes, got_ops, started))
        finally:
            finished.set()  # even if a read raised something unexpected: never hang the wait

    # Completion is signalled with events, not Thread.join/is_alive: a join interrupted by Ctrl-C
    # can leave is_alive() reporting False for a thread that still runs.
    done = [threading.Event() for _ in range(threads)]
    pool = [threading.Thread(target=worker, args=(e,), daemon=True) for e in done]
    start = time.perf_counter()
    for t in pool:
        t.start()
    interrupted: KeyboardInterrupt | None = None
    while not all(e.is_set() for e in done):
        try:
            for e in done:
                e.wait(0.05)
        except KeyboardInterrupt as exc:
            interrupted = exc
            stop.set()
    elapsed = time.perf_counter() - start
    cell = Cell(
        test,
        cache,
        threads,
        elapsed,
        sum(t[0] for t in totals),
        sum(t[1] for t in totals),
        cold_method if cache == "cold" else None,
        interrupted is None,
        max((t[2] for t in totals), default=0),
    )
    if interrupted is not None:
        interrupted.cell = cell  # type: ignore[attr-defined]  # the partial cell rides on the KeyboardInterrupt
        raise interrupted
    return cell


def sequential_items(files: Sequence[tuple[str, int]], threads: int) -> list[tuple[str, int, int]]:
    """Each large file cut into ``threads`` contiguous parts (one whole file for one thread), so
    every thread streams one long range, as one DataLoader worker streams one shard."""
    items = []
    for path, size in files:
        part = -(-size // threads)
        items += [(path, off, min(part, size - off)) for off in range(0, size, part)]
    return items


def whole_file_items(files: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    return [(path, 0, size) for path, size in files]


def direct_io_works(path: str, block_size: int) -> bool:
    """Whether ``path``'s file system accepts O_DIRECT reads (tmpfs and some FUSE ones do not)."""
    if not hasattr(os, "O_DIRECT"):
        return False
    try:
        _read_range(path, 0, 4096, _Buffers(block_size), direct=True)
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


def measure_test(
    test: str,
    items_for: Callable[[int], list[tuple[str, int, int]]],
    thread_counts: list[int],
    seconds: float,
    block_size: int,
    cells: list[Cell],
    progress: ProgressFn,
    cold_exists: bool = True,
) -> None:
    """Cold then warm cells for each thread count, appended to ``cells`` as they finish (so an
    interrupt keeps every finished one). The warm cell reads what the cold one reached, after
    reading it once untimed, so it measures the page cache and nothing else."""
    for threads in thread_counts:
        items = items_for(threads)
        cold: Cell | None = None
        for cache in ("cold", "warm"):
            if cache == "cold" and (test == "metadata" or not cold_exists):
                continue  # cold dentry/inode caches need root-only drop_caches; RAM file systems have no cold
            progress(f"{test.replace('_', ' ')} {cache}, {threads} thread{'s' if threads > 1 else ''}")
            if cache == "cold":
                direct, method = make_cold(sorted({p for p, _, _ in items}), block_size)
            else:
                direct, method = False, None
                if cold is not None and cold.items:
                    items = items[: cold.items]
                if test != "metadata":
                    warm_up(items, block_size)
            try:
                cell = run_cell(test, cache, items, threads, seconds, block_size, direct, method)
            except KeyboardInterrupt as exc:
                cells.append(exc.cell)  # type: ignore[attr-defined]  # set by run_cell before it re-raised
                raise
            cells.append(cell)
            cold = cell if cache == "cold" else cold
