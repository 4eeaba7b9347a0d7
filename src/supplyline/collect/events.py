"""What the collectors hand to the record, as typed objects that need no torch to load.

The hooks (``collect/torch_hooks.py``), the stack sampler, the sync counter and the monitor fill
these on the training machine; ``record.py`` keeps them as they are and converts them to JSON
only when the record is saved. ``supplyline report`` and ``compare`` load them back without
importing torch. Times are seconds, sizes bytes; the JSON keys are the field names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from supplyline.collect.samples import Sample

LoaderRole = Literal["train", "other"]


# A training loop with no loader object (collect/loop_wait): described as a loader of these names.
LOOP_TYPE = "training loop"
LOOP_MODULE = ""


class _Named(Protocol):
    loader_type: str
    loader_module: str


def is_loop(loader: _Named | None) -> bool:
    """The "loader" is the training loop itself: it builds its batches with no loader object."""
    return loader is not None and loader.loader_type == LOOP_TYPE and loader.loader_module == LOOP_MODULE


@dataclass
class LoaderInfo:
    """One DataLoader the job iterated, as the hooks saw it."""

    loader_id: int
    batch_size: int | None
    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    persistent_workers: bool
    multiprocessing_context: str | None
    dataset_type: str
    dataset_len: int | None
    dataset_module: str | None
    epochs_started: int = 0
    iter_create_s: list[float] = field(default_factory=list)
    first_batch_s: list[float] = field(default_factory=list)  # per epoch: iterator creation + first fetch
    batches_fetched: int = 0
    fetch_wait_s: float = 0.0
    batch_bytes: int | None = None
    # Set when the record is built: the loader whose batches fed optimizer steps is "train".
    role: LoaderRole = "other"
    dataset_spec: str | None = None  # MODULE:ATTR of its dataset, when the doctor could name it
    # The stack that first iterated the loader, innermost first ("file:line:function"): a Trainer's
    # or Lightning's loop shows in it, so fixes can be written in the framework's own settings.
    iter_stack: list[str] = field(default_factory=list)
    # The loader's own class (``StatefulDataLoader`` from ``torchdata.stateful_dataloader...``): fixes
    # are written in its name; records from before the field read as torch's DataLoader.
    loader_type: str = "DataLoader"
    loader_module: str = "torch.utils.data.dataloader"
    # "process" (DataLoader workers), or "thread" (a torchdata.nodes ParallelMapper's default): thread
    # workers share the training process's CPU time and its GIL, so they are judged from its CPU.
    worker_method: str = "process"
    # An IterableDataset that splits into shards between the workers (Hugging Face's
    # ``to_iterable_dataset(num_shards=N)``): a worker past the N-th gets none, and datasets stops it.
    dataset_shards: int | None = None
    # A streaming library's own knobs, read off the dataset (``collect.dataset_kind``): MosaicML's
    # ``{"library": "mosaicml-streaming", "predownload": 128, "cache_limit": None, "remote": False}``.
    dataset_knobs: dict[str, Any] = field(default_factory=dict)


# The DataLoader settings the fixes change (the trial, `run --apply`, the recommendation, the next step).
LOADER_KEYS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")


@dataclass
class TransferStats:
    """Host-to-device copies on the training thread (CUDA only)."""

    copies: int = 0
    bytes: int = 0
    seconds: float = 0.0
    pinned: int = 0
    pageable: int = 0
    non_blocking: int = 0
    blocking: int = 0
    # What the copies really did (``classify_copy``): only pinned + non_blocking overlaps compute.
    truly_async: int = 0
    non_blocking_pageable: int = 0  # non_blocking asked for, but staged through pinned memory: not async
    stream_syncs: int = 0  # blocking copies: PyTorch synchronises the stream after each one


@dataclass
class SaveEvent:
    """One outermost checkpoint-save call on the training thread (hooked saves nested in it are folded in)."""

    kind: str  # the API called: "torch.save", "safetensors.save_file", "hf.save_pretrained", ... (collect/saves.py)
    start_s: float  # since the step clock's zero
    duration_s: float
    target: str  # the path argument as given ("" when the API takes none)
    in_step: bool
    step: int = 0  # index of the step the save fell in (steps closed before it)
    files: list[str] = field(default_factory=list)  # files written by this call and the saves nested in it
    bytes: int | None = None  # their total size once written (None: written to memory or not found)
    nested: list[str] = field(default_factory=list)  # APIs of the hooked saves inside this one
    caller: str = ""  # "file:line:function" of the frame that made the call
    user_caller: str = ""  # the innermost frame in the user's own files on that stack
    stack: list[str] = field(default_factory=list)  # the caller's stack, innermost first


@dataclass
class LineSample:
    """Stack samples that landed on one source line in one phase."""

    phase: str  # hooked phase at sample time, or "unhooked"
    category: str  # "torch" (inside model/autograd/optimizer code) or "user"
    file: str
    line: int
    function: str
    samples: int
    # Data wait only (num_workers=0): the library code below the DataLoader that the line runs,
    # as "file:line:function": the entry (``Image.filter``) and the innermost library frame.
    library: str = ""
    library_leaf: str = ""


@dataclass
class SamplerInfo:
    interval_s: float
    samples: int
    cpu_s: float  # the stack sampler thread's own CPU time
    monitor_cpu_s: float | None = None  # the host monitor thread's own CPU time


@dataclass
class SyncLine:
    file: str
    line: int
    function: str
    count: int


@dataclass
class GpuInfo:
    available: bool
    syncs: int = 0  # host-device synchronizations seen (CUDA sync debug mode)
    sync_lines: list[SyncLine] = field(default_factory=list)


@dataclass
class MonitorInfo:
    """The host monitor's samples over the run; ``t0_unix_s`` is the step clock's zero."""

    interval_s: float
    samples: list[Sample] = field(default_factory=list)
    gpu_note: str | None = None
    t0_unix_s: float | None = None


# -- GPU timeline (collect/cuda_timeline.py), attributed by analyze/gpu_idle.py ---------------
@dataclass(frozen=True)
class ClockAlignment:
    """Maps CUDA event times to the host clock from one synchronised calibration pair.

    ``host_s`` was read right after the anchor event executed on an idle stream, so an event
    ``elapsed_ms`` after the anchor happened at ``host_s + elapsed_ms / 1000`` on the host clock.
    """

    host_s: float

    def to_host(self, elapsed_ms: float) -> float:
        return self.host_s + elapsed_ms / 1000.0


@dataclass(frozen=True)
class HostInterval:
    """One phase of the training thread, ``start_s``..``end_s`` on the host clock."""

    phase: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class SyncPoint:
    """The host entered a synchronizing CUDA call (``loss.item()``, a blocking copy) at ``t_s``."""

    t_s: float
    line: str  # "train.py:42"


@dataclass(frozen=True)
class StepGpuMarks:
    """One step: its wall window on the host and its two CUDA events (None: not complete yet)."""

    step: int
    start_s: float
    end_s: float
    first_work_s: float | None  # GPU reached the step's first work
    work_done_s: float | None  # GPU finished the step's last work
    work_queued_s: float | None = None  # host recorded the "done" event (after the step's last launch)


@dataclass
class GpuTimeline:
    """What the doctor collected for GPU idle time: per-step CUDA event marks, the training
    thread's phase intervals and the sync calls, all in seconds on the step clock (since its zero).

    Only on CUDA; ``available`` False (with ``note`` saying why) when nothing could be measured."""

    available: bool
    note: str = ""
    device: int | None = None
    # The calibration pair: the host time (on the step clock) at which the anchor event ran.
    alignment_host_s: float | None = None
    marks: list[StepGpuMarks] = field(default_factory=list)
    intervals: list[HostInterval] = field(default_factory=list)
    syncs: list[SyncPoint] = field(default_factory=list)
    steps_pending: int = 0  # steps whose events had not completed at the end
    intervals_dropped: bool = False  # too many phase intervals to keep: attribution covers the first ones


@dataclass
class TrialSegment:
    """One stretch of a fix trial: ``A`` ran as the script wrote it, ``B`` with the fix applied."""

    label: str  # "A" (unchanged) or "B" (fix applied); a worker-count candidate is a "B" of its own
    steps: int  # steps in the segment, the first one included
    steps_per_s: float | None  # over the steps after the first (start-up and the switch left out)
    settings: dict[str, Any] = field(default_factory=dict)  # what B applied (a candidate's loader settings)
    startup_s: float | None = None  # a rebuilt loader's worker start-up up to its first batch
    # A loader trial's rounds: "select" (the unchanged loader and each candidate once, to choose)
    # and "measure" (fresh A/B stretches of the chosen one: the figure). "" for a logging/checkpoint trial.
    round: str = ""


@dataclass
class TrialRecord:
    """A fix tried on the running job for a labelled phase after the observed steps."""

    fix: str  # the finding's check: dataloader | storage | logging | checkpoint
    settings: dict[str, Any]  # what the kept trial applied (the fastest candidate for a loader)
    predicted_speedup: float | None  # the finding's prediction when the trial was planned
    baseline_steps_per_s: float | None  # unchanged: the observed steps, or the A segments
    trial_steps_per_s: float | None  # with the fix: the kept candidate, or the B segments
    measured_speedup: float | None
    spread: list[float] = field(default_factory=list)  # [low, high] of the measured speed-up
    steps: int = 0  # trial steps with the fix applied (real optimizer updates)
    startup_s: float | None = None  # worker start-up of the kept loader, kept out of the rate
    segments: list[TrialSegment] = field(default_factory=list)
    note: str = ""
    loader_type: str | None = None  # the class of the loader a loader trial built (its script's own class)
    # Why the fix itself failed on this job (a DataLoader worker raised), in one line; "" when it ran.
    # A failed trial has no figure, and its fix is not the advice.
    failed: str = ""


@dataclass
class TrialsInfo:
    """Whether the doctor tried its fixes on the job, and what came of it."""

    enabled: bool = False
    steps_requested: int = 0
    note: str = ""  # why no trial ran, or what cut one short
    trials: list[TrialRecord] = field(default_factory=list)
