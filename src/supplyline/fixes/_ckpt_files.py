"""The on-disk layout of a checkpoint directory, and the only code that changes it.

    ckpt-000000100.pt          one torch.save file per step (single process)
    ckpt-000000100.dcp/        a torch.distributed.checkpoint directory (distributed runs)
    .ckpt-000000100.pt.tmp-PID being written; never read, removed on failure or next start
    latest, best               small JSON pointers, replaced atomically

A checkpoint becomes visible only by a rename after its bytes are fsync'ed, and ``latest``
moves only after that rename: a crash at any moment leaves ``latest`` at a complete checkpoint.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import shutil
import time
from dataclasses import dataclass
from typing import Any

import torch

from supplyline.atomic import atomic_write_json
from supplyline.errors import UserError
from supplyline.units import human_bytes

POINTERS = ("latest", "best")
TORCH_FORMAT, DCP_FORMAT = "torch", "dcp"
_SUFFIX = {TORCH_FORMAT: ".pt", DCP_FORMAT: ".dcp"}


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: the saved ``state`` and what the ``latest`` pointer says about it."""

    state: Any
    step: int
    metric: float | None
    path: str


def checkpoint_name(prefix: str, step: int, fmt: str) -> str:
    return f"{prefix}-{step:09d}{_SUFFIX[fmt]}"


def temp_path(directory: str, name: str, tag: str | None = None) -> str:
    """Where ``name`` is written before its rename; the pid keeps two writers apart."""
    return os.path.join(directory, f".{name}.tmp-{tag or os.getpid()}")


def fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable: without it a power loss can undo the rename."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_torch_file(snapshot: Any, directory: str, name: str) -> str:
    """torch.save to a temporary name, fsync, rename into place; the temporary goes on failure."""
    final, tmp = os.path.join(directory, name), temp_path(directory, name)
    try:
        # A Python file object (not a path) so a full disk surfaces as OSError(ENOSPC) in the
        # exception chain instead of only torch's "unexpected pos" message.
        with open(tmp, "wb") as fh:
            torch.save(snapshot, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        fsync_dir(directory)
    except BaseException:
        remove_path(tmp)
        raise
    return final


def publish(directory: str, pointer: str, name: str, step: int, metric: float | None, fmt: str) -> None:
    """Point ``latest`` (or ``best``) at a checkpoint that is already complete on disk."""
    atomic_write_json(
        os.path.join(directory, pointer),
        {
            "name": name,
            "step": step,
            "metric": metric,
            "format": fmt,
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    )
    fsync_dir(directory)


def read_pointer(directory: str, pointer: str = "latest") -> dict[str, Any] | None:
    path = os.path.join(directory, pointer)
    try:
        with open(path, encoding="utf-8") as fh:
            info = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read checkpoint pointer {path}: {exc}") from exc
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        raise UserError(f"checkpoint pointer {path} is not a supplyline pointer (no 'name')")
    return info


def list_checkpoints(directory: str, prefix: str) -> list[tuple[int, str]]:
    """(step, name) of the finished checkpoints in ``directory``, oldest first."""
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)(\.pt|\.dcp)$")
    found = []
    for entry in os.listdir(directory):
        match = pattern.match(entry)
        if match:
            found.append((int(match.group(1)), entry))
    return sorted(found)


def prune(directory: str, prefix: str, keep_last: int) -> None:
    """Remove all but the ``keep_last`` most recently written checkpoints; never one a pointer names.

    Newest by write time, not by step number: a run restarted from step 1 in the same folder
    must keep its own new checkpoints, not the higher-numbered ones an earlier run left behind.
    """
    protected = {info["name"] for info in (read_pointer(directory, p) for p in POINTERS) if info}
    finished = sorted(list_checkpoints(directory, prefix), key=lambda found: (_mtime_ns(directory, found[1]), found[0]))
    for _, name in finished[: max(0, len(finished) - keep_last)]:
        if name not in protected:
            remove_path(os.path.join(directory, name))


def _mtime_ns(directory: str, name: str) -> int:
    try:
        return os.stat(os.path.join(directory, name)).st_mtime_ns
    except OSError:
        return 0  # vanished meanwhile: first in line, and removing it again is harmless


def remove_stale_temps(directory: str, prefix: str) -> None:
    """Temporaries left by a killed process (any pid) are garbage: our checkpoints' and the
    pointers' (supplyline.atomic names those ``.latest.<random>.tmp``)."""
    pattern = re.compile(rf"^\.({re.escape(prefix)}-\d+(\.pt|\.dcp)\.tmp-\w+|(latest|best)\.\w+\.tmp)$")
    for entry in os.listdir(directory):
        if pattern.match(entry):
            remove_path(os.path.join(directory, entry))


def remove_path(path: str) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def describe_write_error(exc: BaseException, directory: str, step: int, size_bytes: int | None = None) -> str:
    """One line a user can act on, whatever layer (torch, DCP, the OS) raised."""
    return (
        f"checkpoint for step {step} was not written to {directory}: {write_error_reason(exc, directory, size_bytes)}"
    )


def write_error_reason(exc: BaseException, directory: str, size_bytes: int | None = None) -> str:
    """Why a checkpoint write failed, in words: a full disk with the sizes, else the OS's or torch's reason."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
        needed = f"the checkpoint needs about {human_bytes(size_bytes)}, " if size_bytes else ""
        free = human_bytes(shutil.disk_usage(directory).free)
        reason = f"the disk is full ({needed}{free} free after removing the partial file)"
    elif isinstance(cause, OSError):
        reason = cause.strerror or str(cause)
    else:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return reason


def load_latest(
    directory: str, map_location: Any = "cpu", weights_only: bool = True, into: dict[str, Any] | None = None
) -> Checkpoint | None:
    """Load the checkpoint ``latest`` points at, or None when there is none yet.

    ``weights_only`` is passed to ``torch.load`` (True refuses to unpickle arbitrary objects).
    A DCP checkpoint loads in place into ``into`` when given (the usual DCP way, resharding
    for the current ranks); otherwise it loads whole into a new dict on this process.
    """
    if not os.path.isdir(directory):
        return None
    info = read_pointer(directory)
    if info is None:
        return None
    path = os.path.join(directory, info["name"])
    try:
        if info.get("format") == DCP_FORMAT:
            from supplyline.fixes._dcp import load_dcp

            state = load_dcp(path, into)
        else:
            state = torch.load(path, map_location=map_location, weights_only=weights_only)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise UserError(f"cannot load checkpoint {path}: {str(exc).strip().splitlines()[0]}") from exc
    return Checkpoint(state=state, step=int(info.get("step", -1)), metric=info.get("metric"), path=path)
