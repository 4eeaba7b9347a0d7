"""Walk a dataset directory once: the regular files in it, and the entries that cannot be read.

``disk``, ``pack`` and ``stage`` all start from this walk, so they agree on what "the dataset" is.
Entries that cannot be read (dangling symlinks, FIFOs and other special files, permission errors)
are counted and listed rather than fatal: one bad file should not stop a diagnosis of a million.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from supplyline.errors import UserError
from supplyline.storage.disk.location import pseudo_fs_of


@dataclass(frozen=True)
class FileEntry:
    """One regular file: absolute ``path``, ``rel`` path under the walked root, ``size`` in bytes."""

    path: str
    rel: str
    size: int


@dataclass
class Walk:
    """What a walk found under ``root``."""

    root: str
    files: list[FileEntry] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (rel path, reason)
    directories: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def walk(path: str) -> Walk:
    """Every regular file under ``path`` (or ``path`` itself if it is a file), sorted by rel path.

    Symlinks to files are followed (datasets are often assembled from links); symlinks to
    directories are not, so a link loop cannot make the walk endless.
    """
    if not os.path.lexists(path):
        raise UserError(f"{path} does not exist")
    root = os.path.abspath(path)
    pseudo = pseudo_fs_of(root)
    if pseudo is not None:
        fs_type, mount_point = pseudo
        raise UserError(
            f"{path} is on {mount_point} ({fs_type}), a view of the kernel, not storage: "
            "its files have no real size or disk behind them; point at a dataset directory"
        )
    result = Walk(root=root)
    if not os.path.isdir(root):
        _add_entry(result, root, os.path.basename(root))
        if not result.files:
            reason = result.unreadable[0][1] if result.unreadable else "not a regular file"
            raise UserError(f"{path} cannot be read: {reason}")
        return result
    _walk_dir(result, root, "")
    result.files.sort(key=lambda f: f.rel)
    result.unreadable.sort()
    return result


def _walk_dir(result: Walk, directory: str, rel_dir: str) -> None:
    result.directories += 1
    try:
        entries = list(os.scandir(directory))
    except OSError as exc:
        result.unreadable.append((rel_dir or ".", exc.strerror or str(exc)))
        return
    for entry in entries:
        rel = f"{rel_dir}{entry.name}"
        try:
            if entry.is_dir(follow_symlinks=False):
                _walk_dir(result, entry.path, rel + "/")
                continue
            if entry.is_symlink() and os.path.isdir(entry.path):
                result.unreadable.append((rel, "symlink to a directory (not followed)"))
                continue
        except OSError as exc:
            result.unreadable.append((rel, exc.strerror or str(exc)))
            continue
        _add_entry(result, entry.path, rel)


def _add_entry(result: Walk, path: str, rel: str) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        result.unreadable.append((rel, "dangling symlink" if os.path.islink(path) else "vanished"))
        return
    except OSError as exc:
        result.unreadable.append((rel, exc.strerror or str(exc)))
        return
    if not stat.S_ISREG(st.st_mode):
        result.unreadable.append((rel, f"not a regular file ({_kind(st.st_mode)})"))
        return
    if not os.access(path, os.R_OK):
        result.unreadable.append((rel, "permission denied"))
        return
    result.files.append(FileEntry(path=path, rel=rel, size=st.st_size))


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return name
    return "special file"


def describe_unreadable(unreadable: list[tuple[str, str]], limit: int = 5) -> str:
    """One line naming the first few unreadable entries and how many more there are."""
    shown = ", ".join(f"{rel} ({reason})" for rel, reason in unreadable[:limit])
    more = len(unreadable) - limit
    return shown + (f" and {more} more" if more > 0 else "")
