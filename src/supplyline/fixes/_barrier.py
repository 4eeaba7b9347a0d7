"""Read-your-writes for saves written in the background: once ``torch.save(obj, path)`` has returned,
anything this process does that could observe ``path`` or its folder first waits for that write.

Why a barrier at all: a background save makes ``torch.save`` return before the file exists, and real
training code touches the file at once — timm's ``CheckpointSaver`` saves to ``tmp.pth.tar`` and then
``os.replace``s it, keep-last-k rotation lists the folder and removes old files, a log line reads
``os.path.getsize``, an upload starts ``aws s3 cp`` in a child process. Without the barrier each of
those sees no file, or a folder without it, and the job dies (or uploads nothing).

The funnels, read in CPython 3.10–3.13's ``Lib/`` and torch's ``serialization.py``: every Python-level
path access ends in a handful of ``os`` functions looked up on the module at call time, and in
``io.open`` (``builtins.open`` is the same object). ``os.path.exists/isfile/isdir/getsize`` and
``pathlib.Path.stat/exists`` call ``os.stat``; ``glob``, ``os.walk`` and ``Path.iterdir`` call
``os.scandir``/``os.listdir``; ``shutil.copy*`` opens with ``open`` and stats with ``os.stat``;
``shutil.move`` renames; ``shutil.rmtree`` uses ``os.lstat``/``os.open``/``os.scandir``; ``torch.load``
opens its path with ``open``. A child process starts through ``subprocess.Popen._execute_child``,
multiprocessing's ``_posixsubprocess.fork_exec``, ``os.fork``/``posix_spawn``/``system``/``exec*``. Those
are patched; importlib uses the ``posix`` module directly and is not slowed down.

What waits: a call naming the pending path, its folder or any folder above it (a listing, a
``stat``, an ``rmtree``), and every child-process start and ``os._exit`` (a child may read any
file). A call with a descriptor relative to a folder (``dir_fd=``) waits for every pending write,
since its path cannot be told cheaply. A distributed checkpoint (``dcp.save`` made ``async_save``) is pending as its folder and everything
under it, and only the thread that saved waits for it: torch writes it on threads of its own.
Not covered: code that bound a function before the patch
(``from os import stat``), C/Rust extensions that open files themselves (h5py, safetensors'
``safe_open``), another process that reads the file on its own, and aliases of the path through
links. With nothing pending each patched call costs one check of a module global.

A write that failed is raised at the first call that touches its path (the same exception type,
naming the path the script gave), and otherwise reported by the saver's ``finish()``.
"""

from __future__ import annotations

import builtins
import io
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from supplyline.collect.patching import Patcher

PathArg = Any  # str, bytes, os.PathLike or an int descriptor: whatever the patched call takes


@dataclass(eq=False)
class PendingWrite:
    """One background write to ``path``: ``done`` is set when it ended, ``error`` when it failed."""

    path: str
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    reason: str = ""  # the failure in one line, for a report at the end
    raised: bool = False  # the failure reached the script already
    # Only this thread waits (a distributed checkpoint: torch's own writer threads cannot be marked,
    # so every other thread goes through); None: every thread but ours waits.
    waiter: int | None = None


# The writes not yet waited for and the failures not yet raised, by final path. Empty means every
# patched call goes straight through: the check the hot path pays is this dict's truth value.
_writes: dict[str, PendingWrite] = {}
_lock = threading.Lock()
_local = threading.local()  # .writer: this thread writes in the background and never waits on itself
_users = 0
_patcher = Patcher()
_owner_pid = 0

# os functions whose first argument is the one path they touch.
ONE_PATH = (
    "open",
    "stat",
    "lstat",
    "access",
    "remove",
    "unlink",
    "rmdir",
    "listdir",
    "scandir",
    "truncate",
    "chmod",
    "chown",
    "utime",
    "readlink",
)
TWO_PATHS = ("rename", "replace", "link", "symlink")
PROCESS_STARTS = ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp", "execv", "execve")


def acquire() -> None:
    """Install the patches (once, however many savers use them)."""
    global _users, _owner_pid
    with _lock:
        _users += 1
        if _users > 1:
            return
        _owner_pid = os.getpid()
    _install()


def release() -> None:
    """One saver is done (its writes joined); the last one takes the patches off."""
    global _users
    with _lock:
        _users = max(0, _users - 1)
        if _users:
            return
        _writes.clear()
    _patcher.uninstall()


def begin(path: str, only_this_thread: bool = False) -> PendingWrite:
    """A write to the absolute ``path`` (a file, or a folder and what is under it) starts now; the
    caller must ``end`` it. ``only_this_thread``: the calling thread alone waits for it."""
    write = PendingWrite(path, waiter=threading.get_ident() if only_this_thread else None)
    with _lock:
        _writes[path] = write
    return write


def end(write: PendingWrite, error: BaseException | None = None, reason: str = "") -> None:
    """The write ended; a failure stays registered until a touch of its path raises it."""
    write.error, write.reason = error, reason
    with _lock:
        if error is None and _writes.get(write.path) is write:
            del _writes[write.path]
    write.done.set()


def mark_writer_thread() -> None:
    """Called on a background writer thread: its own file-system calls never wait."""
    _local.writer = True


def take_failure(write: PendingWrite) -> BaseException | None:
    """The write's failure, as the script should see it, once; None if it succeeded or was raised."""
    with _lock:
        if write.error is None or write.raised:
            return None
        write.raised = True
        if _writes.get(write.path) is write:
            del _writes[write.path]
    return as_seen_by_script(write.error, write.path)


def as_seen_by_script(error: BaseException, path: str) -> BaseException:
    """The exception a synchronous save would have raised: same type, naming ``path`` (not our temporary
    name). OSErrors keep their errno; other types get the path appended to their message."""
    try:
        if isinstance(error, OSError) and error.errno is not None:
            seen: BaseException = type(error)(error.errno, error.strerror, path)
        else:
            seen = type(error)(f"{error} (torch.save to {path}, written in the background by supplyline)")
    except Exception:  # an exception type that takes other arguments: raise it as it is
        return error
    seen.__cause__ = error
    return seen


# -- waiting ---------------------------------------------------------------------------------
def _related(path: PathArg, pending: str) -> bool:
    """Whether a call on ``path`` could observe ``pending``: the same file, its folder or above, or
    (a distributed checkpoint's folder) a file under it."""
    try:
        name = os.path.abspath(os.fsdecode(os.fspath(path)))
    except TypeError:  # an int descriptor: opened earlier, by a call that waited then
        return False
    return name == pending or pending.startswith(name.rstrip(os.sep) + os.sep) or name.startswith(pending + os.sep)


def _wait_for(paths: Iterable[PathArg], everything: bool = False) -> None:
    """Wait for the pending writes the paths could observe (all of them when ``everything``), and raise
    the first failure among them the script has not seen yet."""
    if getattr(_local, "writer", False) or os.getpid() != _owner_pid:
        return
    with _lock:
        writes = list(_writes.values())
    me = threading.get_ident()
    for write in writes:
        if write.waiter is not None and write.waiter != me:
            continue
        if everything or any(_related(p, write.path) for p in paths):
            write.done.wait()
            failure = take_failure(write)
            if failure is not None:
                raise failure


def wait_all() -> None:
    """Every pending write done (for a child-process start); the first unseen failure is raised."""
    _wait_for((), everything=True)


# -- the patches -----------------------------------------------------------------------------
PATH_KEYWORDS = ("file", "path", "src", "dst")
DIR_FD_KEYWORDS = ("dir_fd", "src_dir_fd", "dst_dir_fd")


def _path_call(original: Callable[..., Any], positions: int) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if _writes:
            if any(kwargs.get(k) is not None for k in DIR_FD_KEYWORDS):
                _wait_for((), everything=True)  # relative to a folder descriptor: any pending write may be it
            else:
                named = [*args[:positions], *(kwargs[k] for k in PATH_KEYWORDS if k in kwargs)]
                _wait_for(named or [os.curdir])  # listdir()/scandir() with no path: the working directory
        return original(*args, **kwargs)

    return call


def _process_call(original: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if _writes:
            wait_all()
        return original(*args, **kwargs)

    return call


def _exit_call(original: Callable[[int], Any]) -> Callable[[int], Any]:
    def exit_now(code: int) -> Any:
        if _writes and os.getpid() == _owner_pid and not getattr(_local, "writer", False):
            failed = []
            with _lock:
                writes = list(_writes.values())
            for write in writes:
                write.done.wait()
                if write.error is not None and not write.raised:
                    failed.append(write.reason or f"{write.path}: {write.error}")
            for reason in failed:
                os.write(2, f"supplyline: {reason}\n".encode(errors="replace"))
            if failed and code == 0:
                code = 1  # a checkpoint the script believes saved is not there: never exit 0
        return original(code)

    return exit_now


def _install() -> None:
    _patcher._patch(builtins, "open", lambda original: _path_call(original, 1))
    _patcher._patch(io, "open", lambda original: _path_call(original, 1))
    for name in ONE_PATH:
        if hasattr(os, name):
            _patcher._patch(os, name, lambda original: _path_call(original, 1))
    for name in TWO_PATHS:
        if hasattr(os, name):
            _patcher._patch(os, name, lambda original: _path_call(original, 2))
    for name in PROCESS_STARTS:
        if hasattr(os, name):
            _patcher._patch(os, name, _process_call)
    _patcher._patch(os, "_exit", _exit_call)
    import subprocess

    if hasattr(subprocess.Popen, "_execute_child"):  # every Popen, run, call and check_output
        _patcher._patch(subprocess.Popen, "_execute_child", _process_call)
    try:
        import _posixsubprocess  # multiprocessing's spawn and forkserver start children with it
    except ImportError:  # not on POSIX
        return
    _patcher._patch(_posixsubprocess, "fork_exec", _process_call)


def _forget_in_child() -> None:
    """A forked child has no writer thread: nothing it does may wait for the parent's writes."""
    _writes.clear()


os.register_at_fork(after_in_child=_forget_in_child)
