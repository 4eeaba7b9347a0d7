"""Take slow log handlers (files on a busy disk, fsync-ing handlers, network handlers) off the
training thread: the thread only puts records on a queue and a listener thread does the I/O.

    from supplyline.fixes import async_logging
    async_logging()          # after logging.basicConfig(...) / your handler set-up

Queued records are written out on a normal exit, on an uncaught exception and on SIGTERM, so
nothing is lost on those endings. SIGKILL and ``os._exit`` skip every clean-up and can still
lose the last queued lines.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from logging.handlers import QueueHandler, QueueListener
from types import TracebackType

from supplyline.fixes import _exit

_active: dict[str, AsyncLogging] = {}
_active_lock = threading.Lock()


class AsyncLogging:
    """A logger whose handlers run on a listener thread; ``stop()`` flushes and puts them back."""

    def __init__(
        self, logger: logging.Logger, handlers: list[logging.Handler], detached: list[logging.Handler]
    ) -> None:
        self.logger = logger
        self.handlers = handlers
        self._detached = detached  # handlers we took off the logger, to restore on stop()
        # SimpleQueue.put is one C call, so a SIGTERM handler interrupting the training thread
        # mid-log can still enqueue the listener's stop sentinel without deadlocking on a lock.
        self.queue: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        self.queue_handler = _StoppableQueueHandler(self.queue)
        self.listener = QueueListener(self.queue, *handlers, respect_handler_level=True)
        self._stopped = False

    def start(self) -> AsyncLogging:
        self.listener.start()
        # One swap, never a moment without handlers: with none, module-level logging.info()
        # calls basicConfig() and leaves a stray stderr handler on the root.
        kept = [h for h in self.logger.handlers if h not in self._detached]
        _swap_handlers(self.logger, [*kept, self.queue_handler])
        _exit.register(self.stop)
        return self

    @property
    def running(self) -> bool:
        return not self._stopped

    def stop(self) -> None:
        """Write out every queued record, stop the listener and restore the original handlers.

        Safe to call more than once, and while other threads still log: no record is lost.
        Called for you at exit and on SIGTERM.
        """
        if self._stopped:
            return
        self._stopped = True
        _exit.unregister(self.stop)
        # The original handlers go back in the same swap that takes the queue handler off, so
        # a thread logging now reaches one or the other. A thread that read the old handler
        # list a moment ago may still call the queue handler: from here on it writes through
        # directly instead of queueing behind the listener's stop sentinel.
        kept = [h for h in self.logger.handlers if h is not self.queue_handler]
        _swap_handlers(self.logger, [*kept, *(h for h in self._detached if h not in kept)])
        self.queue_handler.acquire()  # waits for an enqueue in progress on another thread
        try:
            self.queue_handler.direct = self.listener.handle
        finally:
            self.queue_handler.release()
        self.listener.stop()  # enqueues a sentinel and joins: every earlier record is handled
        for handler in self.handlers:
            handler.flush()
        with _active_lock:
            if _active.get(self.logger.name) is self:
                del _active[self.logger.name]

    def __enter__(self) -> AsyncLogging:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class _StoppableQueueHandler(QueueHandler):
    """Queues records until the listener stops; after that, hands them to the handlers directly."""

    def __init__(self, q: queue.SimpleQueue[logging.LogRecord]) -> None:
        super().__init__(q)
        self.direct: Callable[[logging.LogRecord], None] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        direct = self.direct
        if direct is None:
            super().emit(record)
        else:
            direct(record)  # the listener's own dispatch: same handler levels, same formatting


def _swap_handlers(logger: logging.Logger, handlers: list[logging.Handler]) -> None:
    """Replace ``logger``'s handler list in one assignment. Logger.callHandlers iterates the list
    it read, so a thread mid-log sees the old list or the new one, never a half-edited one."""
    with _logging_lock():
        logger.handlers = handlers


@contextlib.contextmanager
def _logging_lock() -> Iterator[None]:
    """logging's module lock, which addHandler/removeHandler also take (private: its name differs
    between Python versions, hence the fallbacks)."""
    acquire = getattr(logging, "_acquireLock", None)
    release = getattr(logging, "_releaseLock", None)
    if acquire is not None and release is not None:
        acquire()
        try:
            yield
        finally:
            release()
        return
    lock = getattr(logging, "_lock", None)
    if lock is None:
        yield
        return
    with lock:
        yield


def async_logging(
    logger: logging.Logger | str | None = None, handlers: Iterable[logging.Handler] | None = None
) -> AsyncLogging:
    """Move ``logger``'s handlers (the root logger's by default) behind a queue.

    ``handlers``: the handlers to run on the listener thread; by default all of the logger's
    current ones. Handlers passed here that are attached to the logger are taken off it.
    Each handler keeps its own level. Calling this again for the same logger returns the
    running handle unchanged. Records that propagate to ancestor loggers still reach those
    ancestors' handlers synchronously: make the ancestor (usually root) async instead.
    """
    target = logging.getLogger(logger) if isinstance(logger, str) or logger is None else logger
    with _active_lock:
        existing = _active.get(target.name)
        if existing is not None:
            return existing
        attached = list(target.handlers)
        chosen = attached if handlers is None else list(handlers)
        chosen = [h for h in chosen if not isinstance(h, QueueHandler)]
        if not chosen:
            return _without_handlers(target)
        detached = [h for h in chosen if h in attached]
        handle = AsyncLogging(target, chosen, detached).start()
        _active[target.name] = handle
    return handle


def _without_handlers(target: logging.Logger) -> AsyncLogging:
    """No handlers: there is no logging I/O to move. A script in this state usually ``print``s, so
    make stdout/stderr asynchronous instead, and say so once (the notice itself goes through it)."""
    from supplyline.fixes.stdout_queue import async_stdout

    name = "the root logger" if target is logging.getLogger() else f"logger {target.name!r}"
    async_stdout()
    sys.stderr.write(
        f"supplyline: async_logging(): {name} has no handlers, so there is no logging to move; "
        "print() and stdout/stderr writes are made asynchronous instead (async_stdout()). "
        "To queue logging too, call it after logging.basicConfig(...) or pass handlers=[...].\n"
    )
    handle = AsyncLogging(target, [], [])
    handle._stopped = True  # nothing attached, nothing to stop: records keep their usual path
    return handle
