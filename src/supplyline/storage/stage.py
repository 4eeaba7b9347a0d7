"""``supplyline stage``: copy a dataset to RAM (/dev/shm) so every epoch reads from memory.

For a dataset that fits, a RAM disk removes the storage from the supply line (the third checkpoint
of docs/how-it-works.md). Refuses when the copy would not fit with
a margin (tmpfs pages are RAM the training job needs too), copies into a temporary folder while
hashing, verifies the copy against those hashes, then renames it into place, so a DST that exists
is always complete. A marker file records what was staged, for ``--cleanup`` and re-runs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

import psutil

from supplyline.atomic import atomic_write_json
from supplyline.errors import UserError
from supplyline.storage.disk.location import MEMORY_FS, locate
from supplyline.storage.files import FileEntry, Walk, walk
from supplyline.units import human_bytes

MARKER = ".supplyline-stage.json"
CHUNK = 1 << 20


@dataclass
class StageResult:
    dst: str
    files: int
    bytes: int
    skipped: list[tuple[str, str]]
    already: bool = False


def default_dst(src: str) -> str:
    return os.path.join("/dev/shm", "supplyline", os.path.basename(os.path.abspath(src).rstrip("/")) or "dataset")


def fingerprint(result: Walk) -> str:
    h = hashlib.sha256()
    for f in result.files:
        st = os.stat(f.path)
        h.update(f"{f.rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def _read_marker(dst: str) -> dict | None:
    try:
        with open(os.path.join(dst, MARKER), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def check_fits(total: int, dst: str, margin: float) -> None:
    """One clear refusal when ``total`` bytes plus ``margin`` will not fit at DST (or in RAM, for tmpfs)."""
    parent = dst
    while not os.path.exists(parent):
        parent = os.path.dirname(parent) or "."
    needed = int(total * (1 + margin))
    free = shutil.disk_usage(parent).free
    if needed > free:
        raise UserError(
            f"the dataset is {human_bytes(total)}; {parent} has {human_bytes(free)} free "
            f"(needs {human_bytes(needed)} with a {margin:.0%} margin): not staged"
        )
    if locate(parent).fs_type in MEMORY_FS:
        available = psutil.virtual_memory().available
        if needed > available:
            raise UserError(
                f"the dataset is {human_bytes(total)} but only {human_bytes(available)} of RAM is "
                f"available (needs {human_bytes(needed)} with a {margin:.0%} margin): not staged"
            )


def stage(src: str, dst: str, margin: float, force: bool, advance: Callable[[int], None]) -> StageResult:
    result = walk(src)
    if not os.path.isdir(result.root):
        raise UserError(f"{src} is a file; SRC must be a dataset directory")
    if not result.files:
        raise UserError(f"{src} holds no readable files to stage")
    dst = os.path.abspath(dst)
    if dst == result.root or dst.startswith(result.root + "/"):
        raise UserError(f"DST {dst} is inside SRC; choose a place outside it")
    print_ = fingerprint(result)
    if os.path.exists(dst):
        marker = _read_marker(dst)
        if marker and marker.get("source") == result.root and marker.get("fingerprint") == print_ and not force:
            return StageResult(dst, marker["files"], marker["bytes"], [], already=True)
        if marker is None:
            raise UserError(f"{dst} exists and was not made by supplyline stage; choose another DST")
        if not force:
            raise UserError(f"{dst} holds an older or different staged copy; --force replaces it")
    remove_stale_partials(dst)  # a killed stage's copy would hold RAM for good, and count against the fit
    check_fits(result.total_bytes, dst, margin)
    tmp = _partial_path(dst, os.getpid())
    try:
        hashes = _copy(result, tmp, advance)
        _verify(tmp, hashes)
        atomic_write_json(
            os.path.join(tmp, MARKER),
            {"source": result.root, "fingerprint": print_, "files": len(hashes), "bytes": result.total_bytes},
        )
        if os.path.exists(dst):
            shutil.rmtree(dst)
        os.replace(tmp, dst)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, SourceChanged):
            raise UserError(f"{exc}; removed the partial copy, nothing staged — rerun once SRC is stable") from exc
        if isinstance(exc, OSError):
            raise UserError(f"cannot stage into {dst}: {exc.strerror or exc}; removed the partial copy") from exc
        if isinstance(exc, KeyboardInterrupt):
            raise UserError("interrupted; removed the partial copy", code=130) from None
        raise
    return StageResult(dst, len(hashes), result.total_bytes, result.unreadable)


def _copy(result: Walk, tmp: str, advance: Callable[[int], None]) -> dict[str, str]:
    """Copy every file, hashing what was read from the source; rel path -> sha256."""
    os.makedirs(tmp)
    hashes: dict[str, str] = {}
    copied = 0
    for f in result.files:
        target = os.path.join(tmp, f.rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        h = hashlib.sha256()
        src_fh = _open_source(f)
        with src_fh, open(target, "wb") as dst_fh:
            for block in iter(functools.partial(_read_source, f, src_fh), b""):
                h.update(block)
                dst_fh.write(block)
                copied += len(block)
                advance(copied)
        try:
            shutil.copystat(f.path, target)
        except FileNotFoundError as exc:
            raise SourceChanged(f"{f.rel} vanished from SRC while it was being copied") from exc
        hashes[f.rel] = h.hexdigest()
    return hashes


class SourceChanged(Exception):
    """A source file vanished or failed to read mid-copy: a problem with SRC, not with DST."""


def _open_source(f: FileEntry) -> BinaryIO:
    try:
        return open(f.path, "rb")
    except FileNotFoundError as exc:
        raise SourceChanged(f"{f.rel} vanished from SRC while it was being copied") from exc
    except OSError as exc:
        raise SourceChanged(f"cannot read {f.rel} in SRC: {exc.strerror or exc}") from exc


def _read_source(f: FileEntry, fh: BinaryIO) -> bytes:
    try:
        return fh.read(CHUNK)
    except OSError as exc:
        raise SourceChanged(f"cannot read {f.rel} in SRC: {exc.strerror or exc}") from exc


def _partial_path(dst: str, pid: int) -> str:
    return os.path.join(os.path.dirname(dst), f".{os.path.basename(dst)}.partial-{pid}")


def remove_stale_partials(dst: str) -> list[str]:
    """Remove the partial copies of DST left by a stage that was killed (its PID is gone).

    A partial of a stage still running (another terminal) is left alone. Returns what was removed.
    """
    parent, prefix = os.path.dirname(dst), f".{os.path.basename(dst)}.partial-"
    try:
        entries = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in entries:
        pid_text = name[len(prefix) :] if name.startswith(prefix) else ""
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not _pid_alive(int(pid_text)):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
            removed.append(os.path.join(parent, name))
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _verify(tmp: str, hashes: dict[str, str]) -> None:
    for rel, expected in hashes.items():
        h = hashlib.sha256()
        with open(os.path.join(tmp, rel), "rb") as fh:
            for block in iter(lambda: fh.read(CHUNK), b""):
                h.update(block)
        if h.hexdigest() != expected:
            raise UserError(f"verification failed: the copy of {rel} differs from the source; nothing staged")


def cleanup(dst: str) -> bool:
    """Remove a staged copy and any partial copies left by killed stages; False when there was
    nothing at DST. Refuses folders it did not make."""
    partials = remove_stale_partials(dst)
    if not os.path.exists(dst):
        return bool(partials)
    if _read_marker(dst) is None:
        raise UserError(f"{dst} was not made by supplyline stage; not removing it")
    shutil.rmtree(dst)
    parent = os.path.dirname(os.path.abspath(dst))
    if os.path.basename(parent) == "supplyline":
        try:
            os.rmdir(parent)  # the default /dev/shm/supplyline/, once it holds nothing
        except OSError:
            pass
    return True
