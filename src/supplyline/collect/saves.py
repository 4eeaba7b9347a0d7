"""Checkpoint saves as users write them: every API that writes one, nested calls folded together.

A real checkpoint is rarely one ``torch.save``: the Hugging Face Trainer's ``_save_checkpoint``
writes ``model.safetensors`` (through ``save_pretrained`` or ``safetensors.torch.save_file``) and
then ``optimizer.pt``, ``scheduler.pt``, ``rng_state.pth`` and ``training_args.bin`` with
``torch.save``; Lightning's ``Trainer.save_checkpoint`` goes through its ``CheckpointIO`` into a
``torch.save`` to memory. The outermost hooked call on the training thread is the one that is
timed and recorded; hooked saves inside it only add their files, so nothing is counted twice.
Saves made together in the same step but by separate calls are grouped later, by
``collect/checkpoints.py``.

Each recorded save carries its step index, the files it wrote with their total size, the API,
the frame that made the call and the stack above it (how the doctor tells a Trainer or Lightning
job from a plain loop).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from supplyline import phases as P
from supplyline.collect.events import SaveEvent
from supplyline.collect.frames import innermost_user, stack_of

_now = time.perf_counter
_MAX_SCAN = 2000  # directory entries looked at per save: a checkpoint folder, not a dataset


# Where each API takes its destination: (position in args, keyword). Methods patched on a class
# receive ``self`` as args[0], so their positions count it.
SAVE_APIS: dict[str, tuple[int, str]] = {
    "torch.save": (1, "f"),
    "dcp.save": (99, "checkpoint_id"),  # keyword-only in DCP
    "dcp.async_save": (99, "checkpoint_id"),
    "safetensors.save_file": (1, "filename"),
    "safetensors.save_model": (1, "filename"),
    "hf.save_pretrained": (1, "save_directory"),
    "hf.trainer_checkpoint": (99, ""),  # Trainer._save_checkpoint(model, trial): the folder is internal
    "lightning.save_checkpoint": (1, "filepath"),
    "lightning.checkpoint_io": (2, "path"),
}


def target_of(kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    pos, name = SAVE_APIS.get(kind, (1, "f"))
    if len(args) > pos:
        return args[pos]
    return kwargs.get(name) if name else None


def as_path(target: Any) -> str | None:
    """A filesystem path from a save destination, or None for a buffer or a storage writer."""
    if not isinstance(target, (str, os.PathLike)):
        target = getattr(target, "path", None)  # DCP's FileSystemWriter, or a writer with a path
    if not isinstance(target, (str, os.PathLike)):
        return None
    path = os.fspath(target)
    return path if isinstance(path, str) else None


class _OpenSave:
    """The outermost save in progress: what its nested saves add."""

    def __init__(self, kind: str, wall_start: float) -> None:
        self.kind = kind
        self.wall_start = wall_start
        self.paths: list[str] = []
        self.nested: list[str] = []


class SaveRecorder:
    """Wraps save APIs so the outermost call on the training thread becomes one ``SaveEvent``."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.events: list[SaveEvent] = []
        self._open: _OpenSave | None = None  # only the training thread sets it

    def wrapper(self, kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        recorder = self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def save(*args: Any, **kwargs: Any) -> Any:
                if threading.get_ident() != recorder.clock.train_tid:
                    return original(*args, **kwargs)  # a background writer's save is not the loop waiting
                if recorder._open is not None:
                    recorder._note_nested(kind, args, kwargs)
                    return original(*args, **kwargs)
                return recorder._outer(kind, original, args, kwargs)

            save.__name__ = getattr(original, "__name__", "save")
            return save

        return make

    def _note_nested(self, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        current = self._open
        if current is None:
            return
        current.nested.append(kind)
        path = as_path(target_of(kind, args, kwargs))
        if path:
            current.paths.append(path)

    def _outer(self, kind: str, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        clock = self.clock
        t = clock.enter(P.CHECKPOINT)
        if t < 0:  # inside another hooked phase: that phase owns the time
            return original(*args, **kwargs)
        self._open = current = _OpenSave(kind, time.time())
        step, caller_frame = clock.step_count, sys._getframe(2)  # 0: _outer, 1: the wrapper, 2: the caller
        try:
            return original(*args, **kwargs)
        finally:
            self._open = None
            duration = _now() - t
            in_step = clock.open_start is not None
            clock.leave(P.CHECKPOINT, t)
            try:
                self.events.append(self._event(kind, args, kwargs, t, duration, in_step, step, caller_frame, current))
            except Exception:  # describing the save must never fail the user's save
                pass

    def _event(
        self,
        kind: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        t: float,
        duration: float,
        in_step: bool,
        step: int,
        caller_frame: Any,
        current: _OpenSave,
    ) -> SaveEvent:
        target = target_of(kind, args, kwargs)
        path = as_path(target)
        roots = ([path] if path else []) + current.paths
        files, nbytes = written_files(roots, current.wall_start)
        stack = stack_of(caller_frame)
        return SaveEvent(
            kind=kind,
            start_s=t - self.clock.t0,
            duration_s=duration,
            target=str(target if target is not None else "")[:200],
            in_step=in_step,
            step=step,
            files=files,
            bytes=nbytes,
            nested=current.nested,
            caller=stack[0] if stack else "",
            user_caller=innermost_user(stack),
            stack=stack,
        )


def written_files(roots: list[str], since_unix: float) -> tuple[list[str], int | None]:
    """The files a save wrote: each file root itself, and for a folder (``save_pretrained``, DCP,
    a Trainer checkpoint) the files in it modified since the save began; with their total bytes."""
    if not roots:
        return [], None
    roots = [os.path.abspath(r) for r in roots]  # a nested save's relative path and the scan's must meet
    folder = _common_folder(roots)
    seen: dict[str, int] = {}
    for root in roots + ([folder] if folder else []):
        if os.path.isdir(root):
            _scan(root, since_unix, seen)
        elif os.path.isfile(root):
            seen.setdefault(root, os.path.getsize(root))
    if not seen:
        return [], None
    return sorted(seen), sum(seen.values())


def _common_folder(paths: list[str]) -> str | None:
    """The folder several nested saves wrote into (a Trainer's ``checkpoint-500/``), if they share one."""
    if len(paths) < 2:
        return None
    folder = os.path.commonpath([os.path.abspath(p) for p in paths])
    return folder if os.path.isdir(folder) and folder != os.sep else None


def _scan(folder: str, since_unix: float, seen: dict[str, int]) -> None:
    budget = _MAX_SCAN
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            budget -= 1
            if budget < 0:
                return
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if st.st_mtime >= since_unix - 0.05:  # coarse file-system clocks: allow a little slack
                seen.setdefault(path, st.st_size)
