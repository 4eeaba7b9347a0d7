"""From the record's saves to checkpoints and their real cadence ("4 checkpoints, every 5 steps,
340 MB each, 1.2 s each").

Pure functions of the ``saves`` entries: the record's ``SaveEvent`` objects, or their JSON dicts. A checkpoint is what a
user would call one: the saves made in the same step, each starting within ``gap_s`` of the end of
the one before (``torch.save(model)`` then ``torch.save(optimizer)``), count as one, with their
summed time and bytes and all their files; saves without a step index stay one each. Saves nested in one call (a Trainer's
``_save_checkpoint``) are already one entry when they reach here.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GAP_S = 2.0  # saves closer than this, in one step, are one checkpoint
Save = Mapping[str, Any] | Any  # a SaveEvent, or its JSON form (older records lack the newer keys)


def _get(save: Save, key: str, default: Any = None) -> Any:
    if isinstance(save, Mapping):
        return save.get(key, default)
    return getattr(save, key, default)


@dataclass
class Checkpoint:
    step: int | None  # the step index it was written in (None: a record from before steps were kept)
    start_s: float
    duration_s: float  # time the training thread spent in its saves (summed)
    bytes: int | None  # total size of its files (None when no file size was known)
    files: list[str] = field(default_factory=list)
    apis: list[str] = field(default_factory=list)  # the outer APIs called, in order (repeats kept once)
    callers: list[str] = field(default_factory=list)  # "file:line:function" of each call, in order
    saves: int = 0  # outer save calls grouped here
    in_step: bool = True


@dataclass
class Cadence:
    checkpoints: int
    every_steps: float | None  # median steps between consecutive checkpoints (None: fewer than two)
    bytes_each: float | None  # median size (None when no size was known)
    seconds_each: float  # median time on the training thread
    files_each: float  # median number of files

    def sentence(self) -> str:
        """``4 checkpoints, every 5 steps, 340 MB each, 1.2 s each``."""
        parts = [f"{self.checkpoints} checkpoint{'s' if self.checkpoints != 1 else ''}"]
        if self.every_steps is not None:
            n = self.every_steps
            parts.append("every step" if n == 1 else f"every {n:.0f} steps" if n == int(n) else f"every {n:.1f} steps")
        if self.bytes_each is not None:
            parts.append(f"{_megabytes(self.bytes_each)} each")
        parts.append(f"{_seconds(self.seconds_each)} each")
        if self.files_each > 1:
            parts.append(f"{self.files_each:.0f} files each")
        return ", ".join(parts)


def group_checkpoints(saves: Sequence[Save], gap_s: float = GAP_S) -> list[Checkpoint]:
    """Saves made together (same step, each within ``gap_s`` of the previous one's end) -> checkpoints."""
    out: list[Checkpoint] = []
    last_end = float("-inf")
    for save in sorted(saves, key=lambda s: _get(s, "start_s")):
        step = _get(save, "step")
        current = out[-1] if out else None
        # Without a step index (records from before it was kept) nothing says two saves belong together.
        start = _get(save, "start_s")
        joins = current is not None and step is not None and current.step == step and start - last_end <= gap_s
        if current is None or not joins:
            current = Checkpoint(step=step, start_s=start, duration_s=0.0, bytes=None)
            out.append(current)
        _add(current, save)
        last_end = start + _get(save, "duration_s")
    return out


def _add(ckpt: Checkpoint, save: Save) -> None:
    ckpt.duration_s += _get(save, "duration_s")
    ckpt.saves += 1
    ckpt.in_step = ckpt.in_step and bool(_get(save, "in_step", True))
    target = _get(save, "target")
    files = _get(save, "files") or ([target] if target else [])
    ckpt.files += [f for f in files if f not in ckpt.files]
    nbytes = _get(save, "bytes")
    if nbytes is not None:
        ckpt.bytes = (ckpt.bytes or 0) + int(nbytes)
    kind = _get(save, "kind")
    if kind not in ckpt.apis:
        ckpt.apis.append(kind)
    if _get(save, "caller"):
        ckpt.callers.append(_get(save, "caller"))


def cadence(checkpoints: Sequence[Checkpoint]) -> Cadence:
    """How often and how big: medians, so one odd checkpoint (the first, the final save) does not skew them."""
    steps = [c.step for c in checkpoints if c.step is not None]
    gaps = [b - a for a, b in itertools.pairwise(steps) if b > a]
    sizes = [c.bytes for c in checkpoints if c.bytes is not None]
    return Cadence(
        checkpoints=len(checkpoints),
        every_steps=float(statistics.median(gaps)) if gaps else None,
        bytes_each=float(statistics.median(sizes)) if sizes else None,
        seconds_each=statistics.median(c.duration_s for c in checkpoints) if checkpoints else 0.0,
        files_each=float(statistics.median(len(c.files) for c in checkpoints)) if checkpoints else 0.0,
    )


def describe(saves: Sequence[Save], in_step_only: bool = True) -> str:
    """The cadence sentence for a record's saves (those inside training steps by default)."""
    chosen = [s for s in saves if _get(s, "in_step", True)] if in_step_only else list(saves)
    return cadence(group_checkpoints(chosen)).sentence()


def _megabytes(n: float) -> str:
    """Decimal units, as file managers and ``ls -h --si`` print checkpoint sizes."""
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    if n >= 1e6:
        return f"{n / 1e6:.0f} MB" if n >= 1e7 else f"{n / 1e6:.1f} MB"
    if n >= 1e3:
        return f"{n / 1e3:.0f} kB"
    return f"{n:.0f} B"


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 1 else f"{s * 1e3:.0f} ms"
