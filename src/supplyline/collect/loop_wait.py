"""The data wait of a training loop with no loader object (nanoGPT's ``get_batch`` on a memmap, a
Python generator): the time from an update (or a backward) to the next first model call, less the
hooked phases inside it (a print, a save, an eval), is the time the loop spent building its batch.

How it is seen at a cost of a few microseconds per step: after each update of a job that has
fetched from no DataLoader, one global ``register_module_forward_pre_hook`` is armed; the first
module call on the training thread (the model's forward, outermost, outside any hooked phase) ends
the window and removes the hook again, so every other module call of the step takes torch's fast
path (``Module._call_impl`` skips hooks when none are registered). While the window is open the
clock's phase reads "data_wait", so the stack sampler attributes its samples to the lines that build
the batch.

Known limit: a loop that builds its next batch *inside* the step, between the forward and the
backward (nanoGPT's "prefetch the next batch while the GPU runs the forward"), has no window: that
time stays in the step's unhooked time, where the sampler names its lines.
"""

from __future__ import annotations

import sys
import threading
import time
from types import FrameType
from typing import Any

from supplyline import phases as P
from supplyline.collect.events import LOOP_MODULE, LOOP_TYPE, LoaderInfo
from supplyline.collect.frames import USER, file_kind, stack_of
from supplyline.collect.steps import StepClock

_now = time.perf_counter
_cpu = time.thread_time
_ident = threading.get_ident
LOOP_ID = -1  # the loop's "loader id" in the record: no object id is negative


class LoopWait:
    """Arms after each update of a loader-less job; the next first model call closes the window."""

    def __init__(self, clock: StepClock) -> None:
        self.clock = clock
        self.info: LoaderInfo | None = None  # set at the first window closed: the loop, described
        self._handle: Any = None
        self._start = -1.0
        self._hooked_at_start = 0.0
        self._cpu_at_start = 0.0

    def arm(self) -> None:
        """After an update or a backward on the training thread: open (or restart) the window."""
        clock = self.clock
        if clock.last_fetch_loader is not None or clock.external or clock.open_start is None or clock.whatif_label:
            return
        if self._handle is None:
            from torch.nn.modules.module import register_module_forward_pre_hook

            self._handle = register_module_forward_pre_hook(self._first_call)
        self._start = _now()
        self._hooked_at_start = sum(clock.acc.values())  # the step's hooked time so far (0 just after an update)
        self._cpu_at_start = _cpu()
        clock.idle_phase = P.DATA_WAIT
        if not clock.depth:
            clock.phase = P.DATA_WAIT

    def disarm(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.remove()
        self._start = -1.0
        clock = self.clock
        clock.idle_phase = None
        if not clock.depth:
            clock.phase = None

    def _first_call(self, module: Any, args: tuple[Any, ...]) -> None:
        clock = self.clock
        if clock.depth or _ident() != clock.train_tid:
            return None  # a module inside a hooked phase (an eval) or on another thread: the window stays open
        t, cpu = _now(), _cpu()
        started, hooked0, cpu0 = self._start, self._hooked_at_start, self._cpu_at_start
        self.disarm()
        if started < 0 or clock.open_start is None or clock.last_fetch_loader is not None:
            return None
        wait = max(0.0, t - started - (sum(clock.acc.values()) - hooked0))
        clock.add_fetch(True, wait, max(0.0, cpu - cpu0))
        info = self.info
        if info is None:
            info = self.info = _describe(args, sys._getframe(1))
        info.batches_fetched += 1
        info.fetch_wait_s += wait
        return None


def _describe(args: tuple[Any, ...], frame: FrameType | None) -> LoaderInfo:
    """The loop as a loader: no workers, its batch size from the model's first argument, and the stack
    from the user's line that calls the model (torch's ``_call_impl`` frames left out)."""
    while frame is not None and file_kind(frame.f_code.co_filename) != USER:
        frame = frame.f_back
    first = args[0] if args else None
    shape = getattr(first, "shape", None)
    batch = int(shape[0]) if shape is not None and len(shape) else None
    return LoaderInfo(
        loader_id=LOOP_ID,
        batch_size=batch,
        num_workers=0,
        pin_memory=_pinned(first),
        prefetch_factor=None,
        persistent_workers=False,
        multiprocessing_context=None,
        dataset_type="",
        dataset_len=None,
        dataset_module=None,
        iter_stack=stack_of(frame, limit=25),
        loader_type=LOOP_TYPE,
        loader_module=LOOP_MODULE,
        worker_method="thread",
    )


def _pinned(tensor: Any) -> bool:
    try:
        return bool(tensor.is_pinned())
    except Exception:  # not a tensor, or no accelerator to ask
        return False
