"""Samples the training thread's stack to attribute time no hook explains to the user's lines.

A daemon thread reads ``sys._current_frames()`` every ``interval_s`` and counts, per sample: the
phase the hooks say the thread is in, whether the stack is inside torch's module call / autograd
/ optimizer machinery ("torch" = compute), and the innermost frame of the user's own code.

In the data-wait phase with ``num_workers=0`` the training thread runs the dataset itself; there
the sample also keeps the library code below the DataLoader machinery (a torchvision dataset, a
PIL resize, a numpy reduction): ``library`` is the library function called from the user's code
or from the DataLoader (the entry point: ``Image.resize``), ``library_leaf`` the innermost library
frame, and the user line is then the one that called them (or the ``for`` line, when the dataset
itself is a library's). At 25 Hz it costs about 0.2% of one core (measured: record.sampler.cpu_s),
plus brief GIL hand-overs on the training thread; benchmarks/sampler_cost.py gives the cost per sample.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from types import FrameType

from supplyline import phases as P
from supplyline.collect.frames import LIBRARY, MACHINERY, OUTSIDE, USER, file_kind, frame_text
from supplyline.collect.steps import StepClock

_COMPUTE_MARKERS = (
    f"{os.sep}torch{os.sep}nn{os.sep}",
    f"{os.sep}torch{os.sep}autograd{os.sep}",
    f"{os.sep}torch{os.sep}optim{os.sep}",
    f"{os.sep}torch{os.sep}_tensor.py",
    f"{os.sep}torch{os.sep}functional.py",
)


@dataclass(frozen=True)
class LineKey:
    phase: str  # hooked phase at sample time, or "unhooked"
    category: str  # "torch" (inside model/autograd/optimizer code) or "user"
    file: str
    line: int
    function: str
    library: str = ""  # data wait only: "file:line:function" of the library entry below the loader
    library_leaf: str = ""  # data wait only: the innermost library frame


class StackSampler:
    def __init__(self, clock: StepClock, interval_s: float = 0.04) -> None:
        self.clock = clock
        self.interval_s = interval_s
        self.counts: Counter[LineKey] = Counter()
        self.samples = 0
        self.skipped = 0  # samples dropped because the phase changed while the stack was read
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="supplyline-stack-sampler", daemon=True)
        self._compute_cache: dict[str, bool] = {}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        tid = self.clock.train_tid
        try:
            self._sample_until_stopped(tid)
        finally:
            self.cpu_s = time.thread_time()  # this thread's whole CPU time: the sampler's own cost

    def _sample_until_stopped(self, tid: int) -> None:
        sleep, stopped = time.sleep, self._stop.is_set
        while not stopped():
            sleep(self.interval_s)  # cheaper than Event.wait(timeout), which costs ~20 µs of CPU a call
            clock = self.clock
            if clock.open_start is None or clock.whatif_label:
                continue  # outside an observed step: nothing to attribute
            phase = clock.phase
            frame = sys._current_frames().get(tid)
            if frame is None:
                continue
            if clock.phase is not phase:
                # The thread switched phase between the two reads (a fetch ended): the stack would
                # land on the next line under the old phase (`optimizer.zero_grad()` as data wait).
                self.skipped += 1
                continue
            try:
                self._record(frame, phase or "unhooked")
            except Exception:  # a sampler hiccup must never surface in the job
                continue

    def _record(self, frame: FrameType, phase: str) -> None:
        if phase == P.DATA_WAIT:
            self._record_data_wait(frame)
            return
        user: FrameType | None = None
        torch_seen = False
        f: FrameType | None = frame
        while f is not None:
            filename = f.f_code.co_filename
            kind = file_kind(filename)
            if kind == OUTSIDE:
                break  # outside the user's program: runpy, our launcher, the console script
            if user is None and kind == USER:
                user = f
                if torch_seen:
                    break
            if not torch_seen and self._is_compute(filename):
                torch_seen = True
                if user is not None:
                    break
            f = f.f_back
        self.samples += 1
        if user is None:
            return
        key = LineKey(
            phase, "torch" if torch_seen else "user", user.f_code.co_filename, user.f_lineno, user.f_code.co_name
        )
        self.counts[key] += 1

    def _record_data_wait(self, frame: FrameType) -> None:
        """A sample in the data wait: the user line, plus the library code it (or the DataLoader) runs."""
        user: FrameType | None = None
        leaf: FrameType | None = None
        entry: FrameType | None = None
        below_loader = True  # still inside the dataset's code, below the DataLoader machinery
        f: FrameType | None = frame
        while f is not None:
            kind = file_kind(f.f_code.co_filename)
            if kind == USER:
                user = f
                break
            if kind == OUTSIDE:
                break
            if kind == MACHINERY:
                below_loader = False
            elif kind == LIBRARY and below_loader:
                leaf = leaf or f
                entry = f
            f = f.f_back
        self.samples += 1
        if user is None:
            return
        key = LineKey(
            P.DATA_WAIT,
            "user",
            user.f_code.co_filename,
            user.f_lineno,
            user.f_code.co_name,
            frame_text(entry) if entry is not None else "",
            frame_text(leaf) if leaf is not None else "",
        )
        self.counts[key] += 1

    def is_user_file(self, filename: str) -> bool:
        return file_kind(filename) == USER

    def _is_compute(self, filename: str) -> bool:
        cached = self._compute_cache.get(filename)
        if cached is None:
            cached = any(m in filename for m in _COMPUTE_MARKERS)
            self._compute_cache[filename] = cached
        return cached
