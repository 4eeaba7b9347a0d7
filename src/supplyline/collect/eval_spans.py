"""Evaluation inside the training loop, timed as its own phase ("eval") on the step clock.

Scripts without a validation DataLoader evaluate inline (nanoGPT's ``estimate_loss`` every N
iterations, under ``@torch.no_grad()`` and ``model.eval()``). That time is not the model's
training work, so these hooks time it apart:

- a ``torch.no_grad()`` / ``torch.inference_mode()`` block entered by the user's own code (a
  ``with`` in the user's file, or the user's function decorated with it): torch's and libraries'
  internal uses (gradient clipping, weight init) are left alone;
- ``model.eval()`` called from the user's code, until ``model.train()`` or the next backward or
  optimizer step (training has resumed even if ``train()`` was never called).

Only the outermost span counts, on the training thread, through ``StepClock.enter``/``leave``, so
phases inside it (a print during evaluation) belong to it. The hooks are installed only when the
clock has an ``eval`` phase (``"eval" in StepClock.acc``). Known limit: a user's ``with
torch.no_grad():`` block that updates weights by hand (``w -= lr * w.grad``) is timed as eval too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from supplyline import phases as P
from supplyline.collect.frames import USER, file_kind
from supplyline.collect.patching import Patcher

EVAL = P.EVAL
_CONTEXTLIB = f"{os.sep}torch{os.sep}utils{os.sep}_contextlib.py"


def started_by_user(caller: FrameType | None) -> bool:
    """Was a grad-mode context entered by the user's code: a ``with`` in the user's file, or the
    user's function decorated with ``@torch.no_grad()`` (torch's ``_contextlib`` holds it as ``func``)?"""
    if caller is None:
        return False
    filename = caller.f_code.co_filename
    if file_kind(filename) == USER:
        return True
    if filename.endswith(_CONTEXTLIB):
        func = caller.f_locals.get("func")
        code = getattr(func, "__code__", None)
        return code is not None and file_kind(code.co_filename) == USER
    return False


def _called_by_user(caller: FrameType, eval_name: str) -> bool:
    """``model.eval()`` calls ``train(False)`` from torch's ``Module.eval`` (``eval_name``): look one frame further."""
    if caller.f_code.co_name == eval_name and file_kind(caller.f_code.co_filename) != USER and caller.f_back:
        caller = caller.f_back
    return file_kind(caller.f_code.co_filename) == USER


class EvalSpans(Patcher):
    """Patches the grad-mode contexts and ``Module.train`` to time evaluation on ``clock``."""

    def __init__(self, clock: Any) -> None:
        super().__init__()
        self.clock = clock
        self.spans = 0  # outermost eval spans timed
        self._eval_mode_started = -1.0  # start of an open model.eval() span, -1 when none

    def install(self) -> bool:
        if EVAL not in self.clock.acc:
            return False  # a step clock without the phase: nothing to time it into
        import torch

        for cls in (torch.no_grad, torch.inference_mode):
            self._patch(cls, "__enter__", self._wrap_enter)
            self._patch(cls, "__exit__", self._wrap_exit)
        self._patch(torch.nn.Module, "train", self._wrap_train)
        return True

    def training_resumed(self) -> None:
        """A backward or optimizer step began: an open ``model.eval()`` span ends here."""
        if self._eval_mode_started >= 0:
            started, self._eval_mode_started = self._eval_mode_started, -1.0
            self.clock.leave(EVAL, started)

    def _wrap_enter(self, original: Callable[..., Any]) -> Callable[..., Any]:
        spans, clock = self, self.clock

        def __enter__(ctx: Any) -> Any:
            result = original(ctx)
            if clock.depth == 0 and started_by_user(sys._getframe(1)):
                t = clock.enter(EVAL)
                if t >= 0:
                    spans.spans += 1
                    ctx._supplyline_eval_started = t
            return result

        return __enter__

    def _wrap_exit(self, original: Callable[..., Any]) -> Callable[..., Any]:
        clock = self.clock

        def __exit__(ctx: Any, *exc: Any) -> Any:
            started = ctx.__dict__.pop("_supplyline_eval_started", -1.0)
            if started >= 0:
                clock.leave(EVAL, started)
            return original(ctx, *exc)

        return __exit__

    def _wrap_train(self, original: Callable[..., Any]) -> Callable[..., Any]:
        import torch  # loaded: its Module.train is the one being wrapped

        spans, clock = self, self.clock
        eval_name = torch.nn.Module.eval.__name__

        def train(module: Any, mode: bool = True) -> Any:
            if mode:
                spans.training_resumed()
            elif clock.depth == 0 and _called_by_user(sys._getframe(1), eval_name):
                t = clock.enter(EVAL)
                if t >= 0:
                    spans.spans += 1
                    spans._eval_mode_started = t
            return original(module, mode)

        return train
