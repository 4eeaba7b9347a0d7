"""``torch.save`` (and ``torch.distributed.checkpoint.save``) written in the background, to the
same path the script named, with read-your-writes.

On the call, on the training thread, the state is copied to CPU memory (``fixes._snapshot``, the
copy ``AsyncCheckpointer`` takes), so the optimizer may change the weights right away; a
background thread then writes the copy with the original ``torch.save`` to a temporary name in
the same directory and renames it into place, so a reader never sees half a file. At most one
save is in flight: the next ``torch.save`` waits for the previous one, which bounds memory to
one extra copy of the state, and the next copy is made into that copy's memory where the shapes
match (no page faults on every save).

Read-your-writes (``fixes._barrier``): until the write is done, anything the process does that
could observe the path or its folder — ``open``, ``os.stat``/``os.path.exists``/``getsize``,
``os.replace``/``remove``, ``shutil.copy``, a folder listing or ``glob``, ``torch.load``, a child
process — waits for it, so timm's save-to-tmp-then-``os.replace`` and keep-last-k rotation see
the file exactly as after a synchronous save.

A save that cannot succeed in the background is made synchronously, so that it fails at the same
call with the same exception as without supplyline: a missing or read-only folder, a path that
is a folder or a file the process may not write, or a file system without room for the state
beside the old file. A write that still fails in the background (the disk filled meanwhile) is
raised, as the same exception type naming the script's path, by the first call that touches the
path or by the next ``torch.save``; if none comes, ``finish()`` reports it and the run exits
non-zero. A save to a file object (not a path) stays synchronous: the caller may read the buffer next.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable
from typing import Any

from supplyline.collect.patching import Patcher
from supplyline.fixes import _barrier, _exit
from supplyline.fixes._ckpt_files import remove_path, write_error_reason
from supplyline.fixes._snapshot import snapshot_to_cpu, tensor_bytes


class BackgroundSaves:
    """Install, let the script save, then ``finish()``: every write done, the first error returned."""

    def __init__(self, reuse: Any = None) -> None:
        """``reuse``: the ``last_snapshot`` of an earlier, finished saver (a trial's previous stretch)."""
        self._patcher = Patcher()
        self._thread: threading.Thread | None = None
        self._last: _barrier.PendingWrite | None = None  # the latest background write, done or not
        # A failed distributed save not yet raised to the script: the exception and its one-line description.
        self._pending: tuple[BaseException, str] | None = None
        self._dcp_future: Any = None
        self._dcp_write: _barrier.PendingWrite | None = None  # the folder of the latest distributed save
        self.last_snapshot: Any = reuse  # the state last copied, whose memory the next copy reuses
        self.saves = 0
        self.busy_s = 0.0  # the writer threads' time on torch.save writes (a fix trial compares it with the steps')
        self.untimed = 0  # distributed saves, written by torch's own threads: not in busy_s
        self.synchronous: dict[str, int] = {}  # saves made on the call, by why
        self.pid = os.getpid()
        self._installed = False
        self._swept: set[str] = set()  # folders whose dead processes' staging folders were removed

    def install(self) -> BackgroundSaves:
        import torch

        _barrier.acquire()
        self._installed = True
        self._patcher._patch(torch, "save", self._wrap_save)
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
            path = os.path.abspath(os.fsdecode(os.fspath(f)))
            size = tensor_bytes(obj)
            why = refusal(path, size)
            if why is not None:  # it would fail, or may not fit: fail (or succeed) exactly as without us
                self.synchronous[why] = self.synchronous.get(why, 0) + 1
                return original(obj, f, *args, **kwargs)
            # The previous snapshot is written (joined above): its memory takes this copy.
            snapshot = snapshot_to_cpu(obj, reuse=self.last_snapshot)
            self.last_snapshot = snapshot
            self._start(lambda: self._write(original, snapshot, path, args, kwargs), path, size)
            return None

        return save

    def _write(self, original: Callable[..., Any], snapshot: Any, path: str, args: Any, kwargs: Any) -> None:
        # Written under the script's own file name, in a private folder beside it: torch names the
        # records inside the file after its name, so a temporary name would change the file's bytes.
        directory, name = os.path.split(path)
        if directory not in self._swept:
            self._swept.add(directory)
            sweep_dead_staging(directory)
        staging = os.path.join(directory, f"{STAGING_PREFIX}{os.getpid()}")
        os.makedirs(staging, exist_ok=True)
        tmp = os.path.join(staging, name)
        try:
            original(snapshot, tmp, *args, **kwargs)
            os.replace(tmp, path)
        finally:
            remove_path(tmp)
            with contextlib.suppress(OSError):  # another save of ours may be using it: it goes last
                os.rmdir(staging)

    # -- torch.distributed.checkpoint.save -------------------------------------------------
    def _wrap_dcp_save(self, original: Callable[..., Any]) -> Callable[..., Any]:
        import torch.distributed.checkpoint as dcp

        async_save = dcp.async_save

        def save(state_dict: Any, *args: Any, **kwargs: Any) -> Any:
            # async_save stages the copy before it returns and writes on its own thread.
            self._join()
            self._raise_pending()
            result = async_save(state_dict, *args, **kwargs)
            self._dcp_future = future = getattr(result, "upload_completion", result)
            self.saves += 1
            self.untimed += 1
            folder = kwargs.get("checkpoint_id")
            if isinstance(folder, (str, os.PathLike)) and hasattr(future, "add_done_callback"):
                # Until written, a look at the folder from this thread waits (torch's writer threads never do).
                write = _barrier.begin(os.path.abspath(os.fsdecode(os.fspath(folder))), only_this_thread=True)
                self._dcp_write = write
                future.add_done_callback(lambda done: _barrier.end(write, done.exception()))
            return None

        return save

    # -- the writer ------------------------------------------------------------------------
    def _start(self, job: Callable[[], None], path: str, size: int) -> None:
        write = _barrier.begin(path)  # from now on a touch of the path waits for this write

        def run() -> None:
            _barrier.mark_writer_thread()
            t = time.perf_counter()
            try:
                job()
            except BaseException as exc:  # held for the training thread, which raises or reports it
                reason = write_error_reason(exc, os.path.dirname(path), size)
                _barrier.end(write, exc, f"torch.save to {path} failed in the background: {reason}")
            else:
                _barrier.end(write)
            finally:
                self.busy_s += time.perf_counter() - t

        self.saves += 1
        self._last = write
        self._thread = threading.Thread(target=run, name="supplyline-save", daemon=True)
        self._thread.start()

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._dcp_future is not None:
            future, self._dcp_future = self._dcp_future, None
            write, self._dcp_write = self._dcp_write, None
            try:
                future.result()
                if write is not None:
                    _barrier.end(write)
            except BaseException as exc:
                if write is not None:  # the done callback may not have run yet: end it here too
                    _barrier.end(write, exc)
                    if _barrier.take_failure(write) is None:
                        return  # raised already, where the script looked at the folder
                self._pending = (
                    exc,
                    f"distributed checkpoint save failed in the background: {type(exc).__name__}: {exc}",
                )

    def _raise_pending(self) -> None:
        failure = _barrier.take_failure(self._last) if self._last is not None else None
        if failure is not None:
            raise failure
        if self._pending is not None:
            (error, _), self._pending = self._pending, None
            raise error

    def finish(self) -> str | None:
        """Wait for the last write and put torch back; a failure never raised to the script, in one line."""
        self._join()
        _exit.unregister(self._join)
        self._patcher.uninstall()
        last, self._last = self._last, None
        if self._installed:
            self._installed = False
            _barrier.release()
        if last is not None and last.error is not None and not last.raised:
            return last.reason
        return self._pending[1] if self._pending else None


def refusal(path: str, size: int) -> str | None:
    """Why a save to ``path`` of ``size`` tensor bytes must be made on the call, or None.

    A synchronous ``torch.save`` fails at once on these, with its own exception; made in the
    background it would fail later, somewhere else. The room asked for is the state, a margin for
    the file's own records, and the whole old file, which stays until the rename.
    """
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        return "no such folder"
    if os.path.isdir(path):
        return "the path is a folder"
    if not os.access(directory, os.W_OK | os.X_OK):
        return "the folder is not writable"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "the file is not writable"
    try:
        st = os.statvfs(directory)
    except OSError:
        return None  # a file system that does not say: the write will tell
    if st.f_bavail * st.f_frsize < size * 1.05 + ROOM_MARGIN_BYTES:
        return "too little free space for a second copy"
    return None


def sweep_dead_staging(directory: str) -> None:
    """Remove the staging folders a killed process left in ``directory`` (a SIGKILL mid-save leaves
    its partial file there, never under the target's name); a live process's folder is left alone."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(STAGING_PREFIX)]
    except OSError:
        return
    for n in names:
        try:
            pid = int(n[len(STAGING_PREFIX) :])
            os.kill(pid, 0)
        except ValueError:
            continue  # not one of ours
        except ProcessLookupError:
            shutil.rmtree(os.path.join(directory, n), ignore_errors=True)
        except PermissionError:
            continue  # alive, another user's


STAGING_PREFIX = ".supplyline-save-"  # + pid: the folder a background save is written in
ROOM_MARGIN_BYTES = 1 << 20  # a torch.save file's records, names and alignment beyond its tensor bytes
