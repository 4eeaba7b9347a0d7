"""Write files so that nothing is ever left half-written: a temporary name, then a rename."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from supplyline.errors import UserError


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; a full disk or no permission becomes a UserError."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a report should read like any file
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _silent_unlink(tmp)
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        _silent_unlink(tmp)
        raise


def atomic_write_text(path: str, text: str) -> None:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a path with non-UTF-8 bytes (decoded as lone surrogates): written as \udcff
        data = text.encode("utf-8", errors="backslashreplace")
    atomic_write_bytes(path, data)


def atomic_write_json(path: str, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def check_writable(path: str) -> None:
    """Fail now, in one line, if ``path`` could not be written later: a command that measures for
    minutes must not lose its results to a typo in the output path at the end."""
    if os.path.isdir(path):
        raise UserError(f"cannot write {path}: it is a directory")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc
    os.close(fd)
    _silent_unlink(tmp)


def _silent_unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
