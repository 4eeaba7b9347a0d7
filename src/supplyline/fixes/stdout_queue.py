"""Take ``print`` (and every other write to stdout/stderr) off the training thread.

    from supplyline.fixes import async_stdout
    async_stdout()           # once, before the training loop

``print`` to a terminal that scrolls slowly, or to a pipe whose reader falls behind (``| tee``,
a job scheduler's log collector), blocks the training thread once the pipe's buffer is full.
After ``async_stdout()`` the training thread only puts the text on a queue; one background thread
writes it, stdout and stderr in the order they were written, and flushes each stream whenever the
queue runs empty. Everything queued is written at a normal exit, on an uncaught exception
(KeyboardInterrupt from Ctrl-C included) and on SIGTERM; SIGKILL and ``os._exit`` can still lose
the last queued lines.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from types import TracebackType
from typing import Any, TextIO

from supplyline.fixes import _exit

_STOP = object()
_active: AsyncStdout | None = None
_lock = threading.Lock()


class _QueuedStream:
    """Stands in for ``sys.stdout``/``sys.stderr``: ``write`` enqueues; everything else is the original's."""

    def __init__(self, owner: AsyncStdout, original: TextIO, index: int) -> None:
        self._owner = owner
        self._original = original
        self._index = index

    def write(self, text: str) -> int:
        owner = self._owner
        if owner.stopped or os.getpid() != owner.pid:  # a forked child has no writer thread: write directly
            return self._original.write(text)
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        owner.queue.put((self._index, text))  # SimpleQueue.put: one C call, safe from a signal handler
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        # print(..., flush=True) must not wait for a slow reader: the writer flushes when it catches up.
        if self._owner.stopped or os.getpid() != self._owner.pid:
            self._original.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty(), fileno(), buffer...
        return getattr(self._original, name)


class AsyncStdout:
    """The running fix; ``stop()`` writes out everything queued and puts the original streams back."""

    def __init__(self, stdout: TextIO, stderr: TextIO) -> None:
        self.pid = os.getpid()
        self.stopped = False
        self.originals = (stdout, stderr)
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.streams = (_QueuedStream(self, stdout, 0), _QueuedStream(self, stderr, 1))
        self.lost_to_errors = 0  # writes the stream refused (a closed pipe): counted, not raised
        # Daemon: at interpreter exit, non-daemon threads are joined before atexit runs, so a
        # non-daemon writer waiting on its queue would hang the exit that is meant to stop it.
        self._thread = threading.Thread(target=self._run, name="supplyline-async-stdout", daemon=True)

    def start(self) -> AsyncStdout:
        self._thread.start()
        sys.stdout, sys.stderr = self.streams
        _exit.register(self.stop)
        return self

    @property
    def running(self) -> bool:
        return not self.stopped

    def stop(self) -> None:
        """Write out every queued line, stop the writer, restore the streams. Safe to call twice."""
        global _active
        if self.stopped:
            return
        _exit.unregister(self.stop)
        if sys.stdout is self.streams[0]:
            sys.stdout = self.originals[0]
        if sys.stderr is self.streams[1]:
            sys.stderr = self.originals[1]
        if os.getpid() == self.pid and self._thread.is_alive():
            self.queue.put(_STOP)
            self._thread.join()  # every line queued before the sentinel is written first
        self.stopped = True
        for stream in self.originals:
            _flush_quietly(stream)
        with _lock:
            if _active is self:
                _active = None

    def _run(self) -> None:
        get = self.queue.get
        while True:
            batch = [get()]
            try:
                while True:
                    batch.append(self.queue.get_nowait())
            except queue.Empty:
                pass
            if not self._write(batch):
                return

    def _write(self, batch: list[Any]) -> bool:
        """Write one drained batch in order, joining runs to the same stream; False at the sentinel."""
        pending: list[str] = []
        current = -1
        touched: set[int] = set()
        for item in batch:
            if item is _STOP:
                self._emit(current, pending, touched)
                self._flush(touched)
                return False
            index, text = item
            if index != current:
                self._emit(current, pending, touched)
                pending, current = [], index
            pending.append(text)
        self._emit(current, pending, touched)
        self._flush(touched)
        return True

    def _emit(self, index: int, texts: list[str], touched: set[int]) -> None:
        if index < 0 or not texts:
            return
        touched.add(index)
        try:
            self.originals[index].write("".join(texts))
        except (OSError, ValueError):  # a reader that went away: the job goes on
            self.lost_to_errors += len(texts)

    def _flush(self, touched: set[int]) -> None:
        for index in touched:
            _flush_quietly(self.originals[index])

    def __enter__(self) -> AsyncStdout:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _flush_quietly(stream: TextIO) -> None:
    try:
        stream.flush()
    except (OSError, ValueError):
        pass


def _restore_in_forked_child() -> None:
    """A forked child (DataLoader workers) has no writer thread: it writes to the real streams."""
    handle = _active
    if handle is None:
        return
    if sys.stdout is handle.streams[0]:
        sys.stdout = handle.originals[0]
    if sys.stderr is handle.streams[1]:
        sys.stderr = handle.originals[1]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_restore_in_forked_child)


def async_stdout() -> AsyncStdout:
    """Make writes to ``sys.stdout`` and ``sys.stderr`` asynchronous; returns the running handle.

    Calling it again returns the running handle. Writes that bypass ``sys.stdout`` (``os.write(1,
    ...)``, ``sys.stdout.buffer.write``, a C library's printf) are not queued and may overtake it.
    """
    global _active
    with _lock:
        if _active is not None and not _active.stopped:
            return _active
        _active = AsyncStdout(sys.stdout, sys.stderr).start()
        return _active
