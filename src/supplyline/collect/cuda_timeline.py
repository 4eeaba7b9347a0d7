"""Two CUDA events per step, read back without a sync: when the GPU started and finished each step.

The doctor calls, on the training thread:

- ``on_first_work()`` when the step's first batch has arrived (its first GPU work comes next);
- ``on_work_queued()`` after each optimizer update (the step's last launches are queued);
- ``on_step_boundary(start_s, end_s)`` when the step clock closes a step (``time.perf_counter``
  seconds); it also polls the events of earlier steps with ``query()``, which never blocks;
- ``snapshot(t0, wait=True)`` once at the end, for the marks ``analyze.gpu_idle`` attributes.

Event times are mapped to the host clock by one calibration pair taken when the job has
initialised CUDA itself: ``torch.cuda.synchronize()``, record an anchor event on the idle stream,
read ``time.perf_counter()``; later events are ``anchor.elapsed_time(event)`` after it. We never
initialise CUDA for the job (that would create a context on device 0 in every torchrun rank), never
record while the stream is capturing a CUDA graph, and stop with a note at the first error.
Without CUDA everything here is a no-op and ``note`` says why.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from supplyline.collect.events import ClockAlignment, StepGpuMarks

_now = time.perf_counter
MAX_IN_FLIGHT = 64  # steps whose events are still queued; a GPU further behind is not followed


@dataclass
class _Pending:
    first: Any  # the step's first-work event, or None
    done: Any  # the step's last-work event, or None
    queued_s: float | None = None
    start_s: float = 0.0
    end_s: float = 0.0
    step: int = 0


@dataclass
class TimelineSnapshot:
    available: bool
    note: str
    marks: list[StepGpuMarks] = field(default_factory=list)
    pending: int = 0  # steps whose events had not completed when the snapshot was taken
    device: int | None = None


class CudaTimeline:
    """Per-step CUDA events on the current stream of the device the job initialised."""

    def __init__(self, torch_module: Any = None) -> None:
        if torch_module is None:
            import torch as torch_module  # imported here so tests can hand in a fake
        self._torch = torch_module
        self.available = bool(torch_module.cuda.is_available())
        self.note = "" if self.available else "CUDA is not available: GPU idle time was not measured"
        self.started = False
        self.device: int | None = None
        self.alignment: ClockAlignment | None = None
        self._anchor: Any = None
        self._pool: list[Any] = []
        self._in_flight: deque[_Pending] = deque()
        self._open = _Pending(None, None)
        self._first_seen = False
        self._step = 0
        self.marks: list[StepGpuMarks] = []
        self.dropped = 0  # steps not recorded because the GPU was too far behind

    # -- hooks on the training thread ---------------------------------------------------------
    def on_first_work(self) -> None:
        """The step's batch is here: its first GPU work is queued next. Only the first call counts."""
        if self._first_seen or not self._ready():
            return
        self._first_seen = True
        self._open.first = self._record(self._open.first)

    def on_work_queued(self) -> None:
        """An update finished launching; the last one in the step wins (the same event is re-recorded)."""
        if not self._ready():
            return
        self._open.done = self._record(self._open.done)
        self._open.queued_s = _now()

    def on_step_boundary(self, start_s: float, end_s: float) -> None:
        """The step clock closed a step spanning ``start_s``..``end_s``; the next one opens now."""
        step = self._step
        self._step += 1  # counted even before CUDA is up, so step numbers match the step clock's
        if not self._ready():
            return
        closed = self._open
        closed.start_s, closed.end_s, closed.step = start_s, end_s, step
        if len(self._in_flight) >= MAX_IN_FLIGHT:
            self.dropped += 1
            self._release(closed)
        else:
            self._in_flight.append(closed)
        # Until a batch arrives, the next step's first work is taken to start now (a job without
        # a DataLoader); on_first_work re-records this same event when the batch does arrive.
        self._open = _Pending(self._record(None), None)
        self._first_seen = False
        self.poll()

    def poll(self) -> int:
        """Read back every step whose events have completed, oldest first; never blocks."""
        read = 0
        if not self.started:
            return read
        try:
            while self._in_flight and self._complete(self._in_flight[0]):
                self._read(self._in_flight.popleft())
                read += 1
        except Exception as exc:
            self._fail(exc)
        return read

    def snapshot(self, t0: float = 0.0, wait: bool = False) -> TimelineSnapshot:
        """The marks read so far, times relative to ``t0``. ``wait=True`` (at the end of the run,
        when nothing of the job's is left to slow down) synchronises once so the last steps count."""
        if wait and self.started:
            try:
                self._quiet_sync()
            except Exception as exc:
                self._fail(exc)
        self.poll()
        marks = [_shift(m, t0) for m in self.marks]
        note = self.note
        if self.available and not self.started and not note:
            note = "the job never initialised CUDA: GPU idle time was not measured"
        if self.dropped:
            note = (note + "; " if note else "") + f"{self.dropped} step(s) not followed: the GPU was far behind"
        return TimelineSnapshot(self.available, note, marks, len(self._in_flight), self.device)

    # -- internals ----------------------------------------------------------------------------
    def _ready(self) -> bool:
        if self.started:
            return self.available
        if not self.available:
            return False
        cuda = self._torch.cuda
        if not cuda.is_initialized():
            return False  # the job has not touched CUDA (yet): initialising it is not ours to do
        try:
            self._calibrate()
        except Exception as exc:
            self._fail(exc)
            return False
        self.started = True
        return True

    def _calibrate(self) -> None:
        cuda = self._torch.cuda
        self.device = int(cuda.current_device())
        self._anchor = cuda.Event(enable_timing=True)
        self._quiet_sync()
        before = _now()
        self._anchor.record(cuda.current_stream(self.device))
        after = _now()
        self._anchor.synchronize()
        # The anchor ran on an idle stream right after it was submitted: between the two reads.
        self.alignment = ClockAlignment((before + after) / 2)

    def _quiet_sync(self) -> None:
        """``torch.cuda.synchronize`` without the sync counter seeing it (it is ours, not the job's)."""
        cuda = self._torch.cuda
        mode = cuda.get_sync_debug_mode()
        cuda.set_sync_debug_mode(0)
        try:
            cuda.synchronize(self.device)
        finally:
            cuda.set_sync_debug_mode(mode)

    def _record(self, event: Any) -> Any:
        if not self.started:
            return event
        try:
            cuda = self._torch.cuda
            if cuda.is_current_stream_capturing():
                return event  # an event recorded into a CUDA graph capture would break it
            if event is None:
                event = self._pool.pop() if self._pool else cuda.Event(enable_timing=True)
            event.record(cuda.current_stream(self.device))
        except Exception as exc:
            self._fail(exc)
        return event

    @staticmethod
    def _complete(p: _Pending) -> bool:
        # Events complete in stream order: "done" is recorded after "first" in the same step.
        last = p.done if p.done is not None else p.first
        return last is None or bool(last.query())

    def _read(self, p: _Pending) -> None:
        assert self.alignment is not None and self._anchor is not None
        align, anchor = self.alignment, self._anchor
        first = None if p.first is None else align.to_host(anchor.elapsed_time(p.first))
        done = None if p.done is None else align.to_host(anchor.elapsed_time(p.done))
        self.marks.append(StepGpuMarks(p.step, p.start_s, p.end_s, first, done, p.queued_s))
        self._release(p)

    def _release(self, p: _Pending) -> None:
        for event in (p.first, p.done):
            if event is not None:
                self._pool.append(event)

    def _fail(self, exc: BaseException) -> None:
        # The job must never notice us: stop following the GPU and say why once.
        if self.available:
            detail = str(exc).strip().splitlines()
            self.note = f"CUDA timeline stopped: {type(exc).__name__}" + (f": {detail[0]}" if detail else "")
        self.available = False
        self.started = True
        self._in_flight.clear()


def _shift(m: StepGpuMarks, t0: float) -> StepGpuMarks:
    def s(x: float | None) -> float | None:
        return None if x is None else x - t0

    return StepGpuMarks(m.step, m.start_s - t0, m.end_s - t0, s(m.first_work_s), s(m.work_done_s), s(m.work_queued_s))
