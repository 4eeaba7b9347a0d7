"""Print, logging handlers and ``fsync`` handed to one background writer thread.

What moves off the training thread, and what it keeps:

- ``sys.stdout``/``sys.stderr`` writes and flushes (so ``print``) are queued and written by the
  writer thread in the order they were made;
- every logging handler's ``handle`` (file, stream, socket handlers alike) runs on the writer
  thread; the record's message is formatted on the call, as ``QueueHandler.prepare`` does for
  ``fixes.async_logging``, so later changes to the arguments do not show;
- ``os.fsync``/``os.fdatasync`` called on the main thread return at once: the sync runs on the
  writer thread against a duplicate of the descriptor, so the script may close its file. While a
  sync of the same file is queued and not started, another adds nothing (the queued one will
  cover the data written so far).

One queue keeps prints, log records and syncs in their original order. ``finish()`` (also run
at exit and on SIGTERM through ``fixes._exit``) writes everything out before returning. What
changes: data reaches the disk later (a power loss right after a "synced" line can lose it; a
crash of the process cannot, except SIGKILL / ``os._exit`` before the queue is drained). Plain
``file.write`` calls stay on the training thread: they only copy into the page cache.
A forked child (a DataLoader worker) inherits the patches but not the thread, so it writes
synchronously, as it would without us.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from supplyline.collect.patching import Patcher
from supplyline.fixes import _exit

_STOP = object()


class AsyncStream:
    """Stands in for ``sys.stdout``/``sys.stderr``: writes are queued, everything else is the stream's."""

    def __init__(self, stream: TextIO, writer: BackgroundWrites) -> None:
        self._stream = stream
        self._writer = writer

    def write(self, text: str) -> int:
        if self._writer.synchronous():
            return self._stream.write(text)
        self._writer.submit(self._stream.write, text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._writer.synchronous():
            self._stream.flush()
        else:
            self._writer.submit(self._stream.flush)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer, ...
        return getattr(self._stream, name)


class BackgroundWrites:
    """The writer thread, the queue and the patches that feed it; ``finish()`` undoes them all."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._patcher = Patcher()
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._drain, name="supplyline-writes", daemon=True)
        self._pending_syncs: set[tuple[int, int]] = set()
        self._sync_lock = threading.Lock()
        self._streams: tuple[TextIO, TextIO] | None = None
        self.errors: list[str] = []
        self.items = 0
        self.syncs_queued = 0
        self.syncs_merged = 0
        self.busy_s = 0.0  # the writer thread's time on the writes (a fix trial compares it with the steps')
        self._finished = False

    # -- set-up ----------------------------------------------------------------------------
    def install(self) -> BackgroundWrites:
        self._thread.start()
        self._streams = (sys.stdout, sys.stderr)
        sys.stdout = AsyncStream(sys.stdout, self)  # a stand-in with TextIO's writing methods
        sys.stderr = AsyncStream(sys.stderr, self)
        self._patcher._patch(logging.Handler, "handle", self._wrap_handle)
        for name in ("fsync", "fdatasync"):
            if hasattr(os, name):
                self._patcher._patch(os, name, self._wrap_sync)
        _exit.register(self.finish)
        return self

    def synchronous(self) -> bool:
        """Write on the calling thread: from the writer itself, a forked child, or after finish()."""
        return self._finished or threading.current_thread() is self._thread or os.getpid() != self._pid

    def submit(self, function: Callable[..., Any], *args: Any) -> None:
        self.items += 1
        self._queue.put((function, args))

    # -- logging ---------------------------------------------------------------------------
    def _wrap_handle(self, original: Callable[[logging.Handler, logging.LogRecord], Any]) -> Any:
        writer = self

        def handle(handler: logging.Handler, record: logging.LogRecord) -> Any:
            if writer.synchronous() or isinstance(handler, logging.handlers.QueueHandler):
                return original(handler, record)
            _freeze(record)
            writer.submit(original, handler, record)
            return record

        return handle

    # -- fsync -----------------------------------------------------------------------------
    def _wrap_sync(self, original: Callable[[int], None]) -> Callable[[Any], None]:
        writer = self

        def sync(fd: Any) -> None:
            if writer.synchronous() or threading.current_thread() is not threading.main_thread():
                return original(fd)  # other threads (our checkpoint writer) keep their guarantee
            number = fd if isinstance(fd, int) else fd.fileno()
            stat = os.fstat(number)
            key = (stat.st_dev, stat.st_ino)
            with writer._sync_lock:
                if key in writer._pending_syncs:
                    writer.syncs_merged += 1
                    return None
                writer._pending_syncs.add(key)
            duplicate = os.dup(number)
            writer.syncs_queued += 1
            writer.submit(writer._sync_now, original, duplicate, key)
            return None

        return sync

    def _sync_now(self, original: Callable[[int], None], fd: int, key: tuple[int, int]) -> None:
        with self._sync_lock:  # from here on, a new sync request needs a new sync
            self._pending_syncs.discard(key)
        try:
            original(fd)
        finally:
            os.close(fd)

    # -- the thread ------------------------------------------------------------------------
    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            function, args = item
            t = time.perf_counter()
            try:
                function(*args)
            except Exception as exc:  # one failed write must not stop the ones after it
                if len(self.errors) < 5:
                    self.errors.append(f"{getattr(function, '__name__', 'write')}: {type(exc).__name__}: {exc}")
            self.busy_s += time.perf_counter() - t

    def finish(self) -> None:
        """Write out everything queued, stop the thread and put sys.stdout, logging and os back."""
        if self._finished or os.getpid() != self._pid:
            return
        _exit.unregister(self.finish)
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
        self._finished = True
        self._patcher.uninstall()
        if self._streams is not None:
            out, err = self._streams
            if isinstance(sys.stdout, AsyncStream):
                sys.stdout = out
            if isinstance(sys.stderr, AsyncStream):
                sys.stderr = err
            for stream in (out, err):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass


def _freeze(record: logging.LogRecord) -> None:
    """Format the message now: the arguments may change before the writer thread gets to it."""
    try:
        record.msg = record.getMessage()
        record.args = None
    except Exception:  # a broken format string fails later, in the handler, as it would have
        pass
