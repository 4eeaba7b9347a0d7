"""``torch.save`` (and ``torch.distributed.checkpoint.save``) written in the background, to the
same path the script named.

On the call, on the training thread, the state is copied to CPU memory (``fixes._snapshot``, the
copy ``AsyncCheckpointer`` takes), so the optimizer may change the weights right away; a
background thread then writes the copy with the original ``torch.save`` to a temporary name in
the same directory and renames it into place, so a reader never sees half a file. At most one
save is in flight: the next ``torch.save`` waits for the previous one, which bounds memory to
one extra copy of the state, and the next copy is made into that copy's memory where the shapes
match (no page faults on every save). ``torch.load`` of a path still being written waits for it.

A save to a file object (not a path) stays synchronous: the caller may read the buffer next.
A failed background write is raised by the next ``torch.save``/``torch.load`` call (where the
original would have failed sooner), or, if none comes, reported by ``finish()``, which the run
turns into a non-zero exit code.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from supplyline.collect.patching import Patcher
from supplyline.fixes import _exit
from supplyline.fixes._ckpt_files import remove_path, temp_path, write_error_reason
from supplyline.fixes._snapshot import snapshot_to_cpu, tensor_bytes


class BackgroundSaves:
    """Install, let the script save, then ``finish()``: every write done, the first error returned."""

    def __init__(self, reuse: Any = None) -> None:
        """``reuse``: the ``last_snapshot`` of an earlier, finished saver (a trial's previous stretch)."""
        self._patcher = Patcher()
        self._thread: threading.Thread | None = None
        self._writing: str | None = None  # the path of the save in flight
        # A failed write not yet raised to the script: the exception and its one-line description.
        self._pending: tuple[BaseException, str] | None = None
        self._dcp_future: Any = None
        self.last_snapshot: Any = reuse  # the state last copied, whose memory the next copy reuses
        self.saves = 0
        self.pid = os.getpid()

    def install(self) -> BackgroundSaves:
        import torch

        self._patcher._patch(torch, "save", self._wrap_save)
        self._patcher._patch(torch, "load", self._wrap_load)
        try:
            import torch.distributed.checkpoint as dcp
        except ImportError:  # a torch built without distributed: nothing to patch there
            pass
        else:
            if hasattr(dcp, "async_save"):
                self._patcher._patch(dcp, "save", self._wrap_dcp_save)
        _exit.register(self._join)
        return self

    # -- torch.save ------------------------------------------------------------------------
    def _wrap_save(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
            if not isinstance(f, (str, os.PathLike)) or threading.current_thread() is self._thread:
                return original(obj, f, *args, **kwargs)
            if os.getpid() != self.pid:  # a forked child has no writer thread
                return original(obj, f, *args, **kwargs)
            self._join()
            self._raise_pending()
            # The previous snapshot is written (joined above): its memory takes this copy.
            snapshot = snapshot_to_cpu(obj, reuse=self.last_snapshot)
            self.last_snapshot = snapshot
            path = os.path.abspath(os.fspath(f))
            self._start(lambda: self._write(original, snapshot, path, args, kwargs), path, tensor_bytes(obj))
            return None

        return save

    def _write(self, original: Callable[..., Any], snapshot: Any, path: str, args: Any, kwargs: Any) -> None:
        directory = os.path.dirname(path)
        tmp = temp_path(directory, os.path.basename(path))
        try:
            original(snapshot, tmp, *args, **kwargs)
            os.replace(tmp, path)
        except BaseException:
            remove_path(tmp)
            raise

    def _wrap_load(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def load(f: Any, *args: Any, **kwargs: Any) -> Any:
            if self._writing is not None and isinstance(f, (str, os.PathLike)):
                if os.path.abspath(os.fspath(f)) == self._writing:
                    self._join()
                    self._raise_pending()
            return original(f, *args, **kwargs)

        return load

    # -- torch.distributed.checkpoint.save -------------------------------------------------
    def _wrap_dcp_save(self, original: Callable[..., Any]) -> Callable[..., Any]:
        import torch.distributed.checkpoint as dcp

        async_save = dcp.async_save

        def save(state_dict: Any, *args: Any, **kwargs: Any) -> Any:
            # async_save stages the copy before it returns and writes on its own thread.
            self._join()
            self._raise_pending()
            result = async_save(state_dict, *args, **kwargs)
            self._dcp_future = getattr(result, "upload_completion", result)
            self.saves += 1
            return None

        return save

    # -- the writer ------------------------------------------------------------------------
    def _start(self, job: Callable[[], None], path: str, size: int) -> None:
        def run() -> None:
            try:
                job()
            except BaseException as exc:  # held for the training thread, which raises or reports it
                reason = write_error_reason(exc, os.path.dirname(path), size)
                self._pending = (exc, f"torch.save to {path} failed in the background: {reason}")

        self.saves += 1
        self._writing = path
        self._thread = threading.Thread(target=run, name="supplyline-save", daemon=True)
        self._thread.start()

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread, self._writing = None, None
        if self._dcp_future is not None:
            future, self._dcp_future = self._dcp_future, None
            try:
                future.result()
            except BaseException as exc:
                self._pending = (
                    exc,
                    f"distributed checkpoint save failed in the background: {type(exc).__name__}: {exc}",
                )

    def _raise_pending(self) -> None:
        if self._pending is not None:
            (error, _), self._pending = self._pending, None
            raise error

    def finish(self) -> str | None:
        """Wait for the last write and put torch back; a failure never raised to the script, in one line."""
        self._join()
        _exit.unregister(self._join)
        self._patcher.uninstall()
        return self._pending[1] if self._pending else None
