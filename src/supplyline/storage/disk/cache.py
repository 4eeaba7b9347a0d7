"""Page-cache residency (``mincore``) and eviction (``posix_fadvise(DONTNEED)``), without root.

Residency: map the file read-only and ask the kernel which of its pages are in memory — the same
call ``fincore`` and ``vmtouch`` make. Eviction drops a file's clean pages; dirty pages cannot be
dropped, so they are written back first (``fdatasync`` also works on a read-only descriptor).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import random
from dataclasses import dataclass

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
_MAP_FAILED = ctypes.c_void_p(-1).value
PAGE = mmap.PAGESIZE


def resident_bytes(path: str) -> tuple[int, int] | None:
    """(bytes of ``path`` in the page cache, file size), or None when it cannot be asked."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0, 0
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            return None
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                return None
            resident = pages - bytes(vec).count(0)  # only bit 0 is defined; the rest are zero
        finally:
            _libc.munmap(addr, size)
        return min(resident * PAGE, size), size
    finally:
        os.close(fd)


@dataclass
class Residency:
    """Share of a dataset in the page cache, estimated from ``sampled_files`` of its files."""

    cached_fraction: float | None  # 0..1, by bytes; None when nothing could be asked
    cached_bytes_estimate: int
    sampled_files: int


def dataset_residency(paths_and_sizes: list[tuple[str, int]], max_files: int = 5000, seed: int = 0) -> Residency:
    """Ask ``mincore`` for every file, or for a random sample of ``max_files`` of them."""
    files = paths_and_sizes
    if len(files) > max_files:
        files = random.Random(seed).sample(files, max_files)
    cached = total = asked = 0
    for path, _ in files:
        answer = resident_bytes(path)
        if answer is None:
            continue
        asked += 1
        cached += answer[0]
        total += answer[1]
    if asked == 0:
        return Residency(None, 0, 0)
    fraction = cached / total if total else 0.0
    dataset_bytes = sum(size for _, size in paths_and_sizes)
    return Residency(fraction, int(fraction * dataset_bytes), asked)


def evict(path: str) -> bool:
    """Drop ``path``'s pages from the page cache; True when none are left afterwards."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        try:
            os.fdatasync(fd)
        except OSError:
            pass  # some file systems refuse; the advice below still drops clean pages
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    answer = resident_bytes(path)
    return answer is not None and answer[0] == 0


def evict_all(paths: list[str]) -> float:
    """Evict every path; the fraction that ended up fully evicted (1.0 = all cold)."""
    if not paths:
        return 1.0
    return sum(1 for p in paths if evict(p)) / len(paths)
