"""Whose code a stack frame runs: the user's, a library's, or the machinery between them.

The stack sampler, the sync counter and the save hooks all need the same answer for the same
file, so it is decided once here and cached per file name (a dict lookup on the hot path).

- *user*: any file outside the interpreter's stdlib/site-packages and outside supplyline;
- *machinery*: torch's DataLoader code (and torchdata's StatefulDataLoader, a fork of it) and
  supplyline's own wrappers: they sit between the user's ``for`` line and the dataset's code and
  explain nothing about what costs;
- *waiting*: the standard library's waiting code (threading, queue, multiprocessing, selectors):
  waiting for workers (or a lock) is not a library's work either;
- *library*: everything else (torchvision, PIL, numpy, transformers, torch's kernels...).
"""

from __future__ import annotations

import os
import sysconfig
from types import FrameType

_LIB_DIRS = tuple(
    os.path.realpath(p) + os.sep
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    if p
)
OUR_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep
_DATA_MACHINERY = (
    f"{os.sep}torch{os.sep}utils{os.sep}data{os.sep}",
    f"{os.sep}torchdata{os.sep}stateful_dataloader{os.sep}",
)
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
_WAITING = tuple(
    _STDLIB + name
    for name in ("threading.py", "queue.py", "selectors.py", "multiprocessing" + os.sep, "concurrent" + os.sep)
)
_RUNPY = f"{os.sep}runpy.py"  # Python 3.11+ may run a frozen runpy: "<frozen runpy>"

USER, LIBRARY, MACHINERY, WAITING, OUTSIDE = "user", "library", "machinery", "waiting", "outside"

_kinds: dict[str, str] = {}


def file_kind(filename: str) -> str:
    """``user``, ``library``, ``machinery``, ``waiting`` or ``outside`` (runpy: the program's edge)."""
    kind = _kinds.get(filename)
    if kind is None:
        kind = _classify(filename)
        _kinds[filename] = kind  # one dict store: safe from any thread under the GIL
    return kind


def _classify(filename: str) -> str:
    if filename.endswith(_RUNPY) or filename == "<frozen runpy>":
        return OUTSIDE
    if filename.startswith("<"):
        return LIBRARY  # <frozen importlib>, <string>: not a file the user can open
    real = os.path.realpath(filename)
    if real.startswith(OUR_DIR) or any(part in real for part in _DATA_MACHINERY):
        return MACHINERY
    if real.startswith(_WAITING):
        return WAITING
    if real.startswith(_LIB_DIRS):
        return LIBRARY
    return USER


def is_user_file(filename: str) -> bool:
    return file_kind(filename) == USER


def frame_text(frame: FrameType) -> str:
    """``file:line:function``, the form the record keeps frames in."""
    return f"{frame.f_code.co_filename}:{frame.f_lineno}:{frame.f_code.co_name}"


def stack_of(frame: FrameType | None, limit: int = 40) -> list[str]:
    """The frames from ``frame`` outwards (innermost first), up to the program's edge (runpy)."""
    out: list[str] = []
    while frame is not None and len(out) < limit:
        if file_kind(frame.f_code.co_filename) == OUTSIDE:
            break
        out.append(frame_text(frame))
        frame = frame.f_back
    return out


def split_frame(text: str) -> tuple[str, int, str]:
    """``(file, line, function)`` from ``file:line:function``; line 0 when it does not parse."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3:
        return text, 0, ""
    try:
        return parts[0], int(parts[1]), parts[2]
    except ValueError:
        return text, 0, ""


def innermost_user(frames: list[str]) -> str:
    """The first frame of ``frames`` (innermost first) in the user's own files, or ``""``."""
    return next((f for f in frames if is_user_file(split_frame(f)[0])), "")
