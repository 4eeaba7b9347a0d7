"""The step clock: turns hook events into training steps with a time per phase.

A training step is one optimizer update. With a DataLoader, a step runs from the start of the
training loader's fetch to the start of the next fetch that follows an update, so a GAN that steps
two optimizers per batch counts one step, and gradient accumulation (k fetches, one update) counts
one step of k batches. The training loader is the one whose fetches are followed by updates; a
validation loader's fetches end the open step and their time is kept outside the steps.
Without a DataLoader, steps run from one update of the first optimizer seen to the next, and the
first step starts at the first backward or optimizer call (``open_before_first_update``: the
forward before it is not seen); without an optimizer, ``backward()`` calls stand in for updates.

Only the outermost hooked phase counts (a dataset that prints inside a fetch is data wait, not
logging), and only events on the training thread count. Everything here runs on the training
thread's hot path: plain attribute updates, no allocation beyond appending a step's numbers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from supplyline import phases as P
from supplyline.preprocess.schedclock import queue_wait_ns

PHASES = P.CLOCK_PHASES
STEP_FIELDS = (
    "start_s",
    "duration_s",
    *(f"{p}_s" for p in PHASES),
    "batches",
    "h2d_bytes",
    f"{P.DATA_WAIT}_cpu_s",
    "cpu_s",
    "cpu_wait_s",
    "whatif",
)

_now = time.perf_counter
MAX_INTERVALS = 2_000_000  # phase intervals kept for the GPU-idle attribution (~200 MB at most)
_cpu = time.thread_time
# ns the training thread waited for a CPU (Linux schedstat, one pread of a cached fd, ~2 µs): the
# compare gate takes it out of the step time, since other programs' load says nothing of the job.
_queue = queue_wait_ns


class StepClock:
    """Collects per-step phase times. Columnar storage keeps per-step cost to a few appends."""

    def __init__(self, on_step_closed: Callable[[int], None] | None = None) -> None:
        self.t0 = _now()
        self.train_tid = threading.get_ident()
        self.steps: dict[str, list[float]] = {f: [] for f in STEP_FIELDS}
        self._appends = tuple(self.steps[f].append for f in STEP_FIELDS)
        self.outside: dict[str, float] = {p: 0.0 for p in PHASES}
        self.outside["eval_loader_wait"] = 0.0
        self.train_loader: int | None = None
        self.last_fetch_loader: int | None = None
        self.lead_updater: int | None = None  # id() of the optimizer (or 0 for backward) that marks boundaries
        self.has_optimizer = False
        self.open_start: float | None = None
        self.open_cpu = 0.0  # the training thread's CPU time when the step opened
        self.open_wait = 0  # ... and its ns waited for a CPU
        self._closed_wait = 0  # the wait read when the last step closed, for the step opened with it
        self.updates = 0
        self.acc = dict.fromkeys(PHASES, 0.0)
        self.batches = 0
        self.h2d_bytes = 0
        self.data_wait_cpu = 0.0
        self.depth = 0  # >0 while inside an outer hooked phase
        self.phase: str | None = None  # current outer phase, read by the stack sampler
        # The phase between outer phases: "data_wait" while a loader-less loop builds its batch
        # (collect/loop_wait), so the sampler's samples there land on the lines that build it.
        self.idle_phase: str | None = None
        self.whatif_label = 0.0  # 0 observed, 1 compute-only replay
        self.on_step_closed = on_step_closed
        # True when a framework's callbacks mark the steps (supplyline.integrations): hooks then only
        # accumulate phase times, and ``external_boundary`` closes one step and opens the next.
        self.external = False
        # (phase, start, end) of each outer phase on the training thread, kept only when a GPU
        # timeline needs them (``keep_intervals``); None keeps ``leave`` at one extra attribute read.
        self.intervals: list[tuple[str, float, float]] | None = None
        self.intervals_dropped = False

    def keep_intervals(self) -> None:
        self.intervals = []

    # -- phases -------------------------------------------------------------------------------
    def enter(self, phase: str) -> float:
        """Start an outer phase; returns its start time, or -1.0 when nested or off-thread."""
        if self.depth or threading.get_ident() != self.train_tid:
            return -1.0
        self.depth = 1
        self.phase = phase
        return _now()

    def leave(self, phase: str, started: float) -> None:
        if started < 0:
            return
        t = _now()
        elapsed = t - started
        self.depth = 0
        self.phase = self.idle_phase
        if self.intervals is not None:
            self.intervals.append((phase, started, t))
        if self.open_start is None:
            self.outside[phase] += elapsed
        else:
            self.acc[phase] += elapsed

    # -- fetches and updates ------------------------------------------------------------------
    def fetch_begin(self, loader_id: int, t: float) -> bool:
        """Called at the start of a DataLoader fetch; returns True if it counts as a training fetch."""
        previous, self.last_fetch_loader = self.last_fetch_loader, loader_id
        train = self.train_loader
        if train is not None and loader_id != train:
            if self.open_start is not None and self.updates and not self.external:
                self._close(t)
            self.open_start = None  # an eval loop: its time stays outside the steps
            return False
        if self.external:
            if self.open_start is None:
                self._open(t)  # training resumes after an eval loop or a pause: a new step starts here
            return True
        if self.open_start is not None and self.updates:
            self._open(t, self._close(t))
        elif self.open_start is None or (train is None and loader_id != previous):
            self._open(t)  # first fetch, or another loader's fetches before any update (a pre-training eval loop)
        return True

    def add_fetch(
        self, counted: bool, wait_s: float, cpu_s: float, started: float = -1.0, delivered: bool = True
    ) -> None:
        """A fetch that waited ``wait_s`` (it began at ``started`` when it was the outer phase);
        ``delivered`` False for the end-of-epoch fetch, which is waited for but brings no batch."""
        if started >= 0 and self.intervals is not None:
            self.intervals.append((P.DATA_WAIT, started, started + wait_s))
        if not counted:
            self.outside["eval_loader_wait"] += wait_s
            return
        if self.open_start is None:
            self.outside[P.DATA_WAIT] += wait_s
            return
        self.acc[P.DATA_WAIT] += wait_s
        self.data_wait_cpu += cpu_s
        self.batches += delivered  # the end-of-epoch fetch is waited for but counts no batch

    def update(self, updater_id: int) -> None:
        """An optimizer step finished (or a backward, when the job has no optimizer)."""
        if threading.get_ident() != self.train_tid:
            return
        if updater_id != 0:
            self.has_optimizer = True
        elif self.has_optimizer:
            return
        if self.external:
            self.updates += 1  # counted only; the framework's callback marks the boundary
            return
        if self.train_loader is None and self.last_fetch_loader is not None:
            self.train_loader = self.last_fetch_loader
        if self.train_loader is None:
            # No DataLoader: the first updater seen marks the boundaries; an optimizer outranks backward.
            if self.lead_updater is None or (self.lead_updater == 0 and updater_id != 0):
                self.lead_updater = updater_id
            if updater_id == self.lead_updater:
                t = _now()
                cpu = None
                if self.open_start is not None:
                    self.updates += 1
                    cpu = self._close(t)
                self._open(t, cpu)
            return
        self.updates += 1

    def open_before_first_update(self) -> None:
        """Called by the hooks at each backward and optimizer step: without a DataLoader, the first
        step opens at the first of them, so the first update's work is not left outside every step.

        Only when an optimizer exists (its update will close the step) and nothing opened a step yet.
        """
        if (
            self.open_start is None
            and self.has_optimizer
            and self.last_fetch_loader is None
            and not self.external
            and not self.steps["whatif"]
            and threading.get_ident() == self.train_tid
        ):
            self._open(_now())

    def add_collective(self, blocked_s: float) -> None:
        """Time the training thread sat in a backward waiting for DDP's gradient all-reduce.

        Measured inside a backward that is already timed as compute, so it moves from there.
        """
        if blocked_s <= 0:
            return
        acc = self.acc if self.open_start is not None else self.outside
        moved = min(blocked_s, acc[P.COMPUTE_HOOKED])
        acc[P.COMPUTE_HOOKED] -= moved
        acc[P.COLLECTIVE] += moved

    def external_boundary(self) -> None:
        """A framework finished one training step (Lightning's on_train_batch_end, the HF Trainer's
        on_step_end): close the open step here and open the next one."""
        t = _now()
        if self.train_loader is None and self.last_fetch_loader is not None:
            self.train_loader = self.last_fetch_loader
        if self.open_start is not None:
            self.updates = max(self.updates, 1)
            self._close(t)
        self._open(t)

    def external_pause(self) -> None:
        """Training pauses (validation, epoch end): drop the partial step; the next training fetch reopens one."""
        self.open_start = None

    def add_h2d(self, nbytes: int) -> None:
        self.h2d_bytes += nbytes

    # -- steps --------------------------------------------------------------------------------
    def _open(self, t: float, cpu: float | None = None) -> None:
        self.open_start = t
        self.open_cpu = _cpu() if cpu is None else cpu
        self.open_wait = _queue() if cpu is None else self._closed_wait
        self.updates = 0
        self.acc = dict.fromkeys(PHASES, 0.0)
        self.batches = 0
        self.h2d_bytes = 0
        self.data_wait_cpu = 0.0

    def _close(self, t: float) -> float:
        """Close the open step at ``t``; returns the thread CPU time read, for the next ``_open``."""
        cpu = _cpu()
        wait = self._closed_wait = _queue()
        start = self.open_start
        if start is None:
            return cpu
        acc = self.acc
        # One pass of bound appends in STEP_FIELDS order ("whatif" last: readers use its length).
        for append, value in zip(
            self._appends,
            (
                start - self.t0,
                t - start,
                *map(acc.__getitem__, PHASES),
                self.batches,
                self.h2d_bytes,
                self.data_wait_cpu,
                cpu - self.open_cpu,
                (wait - self.open_wait) / 1e9,
                self.whatif_label,
            ),
        ):
            append(value)
        self.open_start = None
        if self.intervals is not None and len(self.intervals) > MAX_INTERVALS:
            self.intervals = None  # bounded memory: GPU idle is then attributed over the first ones
            self.intervals_dropped = True
        if self.on_step_closed is not None:
            self.on_step_closed(len(self.steps["whatif"]))
        return cpu

    def finish(self) -> None:
        """At the end of the run: a step with an update in it is complete; a partial one is dropped."""
        if self.open_start is not None and self.updates and not self.external:
            self._close(_now())
        self.open_start = None  # with external boundaries, what follows the last boundary is not a step

    @property
    def step_count(self) -> int:
        return len(self.steps["duration_s"])

    def elapsed(self) -> float:
        return _now() - self.t0

    def snapshot(self) -> dict[str, Any]:
        return {"steps": {k: list(v) for k, v in self.steps.items()}, "outside_steps_s": dict(self.outside)}
