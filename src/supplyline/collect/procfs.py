"""Small, cheap readers of Linux /proc files, shared by the host and process-tree readers.

The monitor reads a dozen /proc files every sample; ``os.open``/``os.read`` and a targeted search
keep that well under a millisecond, where ``open().read()`` and parsing every line cost more.
"""

from __future__ import annotations

import os


def read_bytes(path: str) -> bytes:
    """The whole file (a /proc file can exceed one read); OSError as the OS gives it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_or_none(path: str) -> bytes | None:
    """The file, or None when it is gone (a process that exited) or not ours to read (EACCES)."""
    try:
        return read_bytes(path)
    except OSError:
        return None


def find_int(text: bytes, key: bytes) -> int:
    """The first number after ``key`` at the start of a line (``/proc/meminfo``, ``vmstat``, ``PID/io``); 0 if absent.

    A search rather than parsing every line: those tables have 7-200 lines and we want a few.
    """
    if text.startswith(key):
        start = 0
    else:
        start = text.find(b"\n" + key)
        if start < 0:
            return 0
        start += 1
    return int(text[start + len(key) : text.find(b"\n", start)].split()[0])
