"""The typed result of ``supplyline preprocess``: what each measurement found, in units named in the field.

Every phase fills one part; a phase that could not run leaves its part ``None`` and says why in
``notes``, so an interrupted or partly failing run still yields a usable report.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Distribution:
    """Summary of a list of durations in milliseconds (``slowest`` pairs an index with its ms)."""

    count: int
    mean_ms: float
    median_ms: float
    p95_ms: float
    max_ms: float
    total_ms: float
    slowest: list[tuple[int, float]] = field(default_factory=list)

    @classmethod
    def of(cls, values_ms: list[float], labels: list[int] | None = None, top: int = 5) -> Distribution:
        if not values_ms:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, [])
        ordered = sorted(values_ms)
        n = len(ordered)
        labels = labels if labels is not None else list(range(n))
        ranked = sorted(zip(labels, values_ms), key=lambda pair: pair[1], reverse=True)[:top]
        return cls(
            count=n,
            mean_ms=sum(ordered) / n,
            median_ms=_quantile(ordered, 0.5),
            p95_ms=_quantile(ordered, 0.95),
            max_ms=ordered[-1],
            total_ms=sum(ordered),
            slowest=[(int(i), float(v)) for i, v in ranked],
        )


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), without needing numpy."""
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class SampleError:
    """One index whose ``__getitem__`` raised; the run went on without it."""

    index: int
    error: str
    traceback: str
    location: Location | None = None  # the innermost frame, where it raised


@dataclass
class Location:
    """Where code lives: ``file:line`` plus the function name, as a user would search for it."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.function} ({self.file}:{self.line})"


@dataclass
class StageTiming:
    """One stage of the transform chain, timed inside the real ``__getitem__`` calls."""

    position: int
    name: str
    location: Location | None
    time: Distribution  # own time: wall minus time the OS kept the thread waiting for a CPU
    share_of_sample: float  # median over samples of stage time / that sample's __getitem__ time, 0..1
    share_of_total: float  # all of this stage's time / all __getitem__ time (outliers weigh in), 0..1
    input_kinds: dict[str, int]  # "numpy" / "pil" / "tensor" / other type name -> count
    output_kinds: dict[str, int]
    deterministic: bool | None  # same input twice -> same output? None: not checked


@dataclass
class ChainReport:
    """The transform chain found on the dataset and what each stage costs."""

    attribute: str  # e.g. "transform" or "transform.transforms"
    kind: str  # "compose" (has .transforms), "list", or "callable"
    stages: list[StageTiming]
    kind_path: list[str]  # most common sequence of data kinds through the chain
    conversions_per_sample: float  # kind changes between numpy / PIL / tensor per sample
    round_trips_per_sample: float  # conversions back to a kind the sample already had
    cacheable_prefix: list[str]  # leading stages that are deterministic (cache their output)
    cacheable_share: float  # their share of the sample time, 0..1


@dataclass
class HotFunction:
    """One row of the cProfile top-N."""

    location: Location
    calls: int
    self_ms_per_sample: float
    cumulative_ms_per_sample: float
    self_share: float  # self time / total profiled time, 0..1


@dataclass
class ConversionSite:
    """A user function converting between NumPy / PIL / tensor, and how often per sample."""

    label: str
    caller: Location
    calls_per_sample: float


@dataclass
class ProfileReport:
    """cProfile of ``__getitem__`` in the main process (written as a .prof snakeviz opens)."""

    samples: int
    total_ms: float
    top: list[HotFunction]
    prof_path: str | None
    conversions_per_sample: dict[str, float]  # conversion function -> calls per sample
    decode_share: float  # time in image decoders / total, 0..1
    decode_sites: list[Location] = field(default_factory=list)  # functions that called the decoders
    conversion_sites: list[ConversionSite] = field(default_factory=list)


@dataclass
class HotLine:
    """A source line where the sampling profiler found the worker thread, with its share of samples."""

    location: Location
    share: float
    source: str
    in_python_loop: bool  # the line sits inside a for/while/comprehension of its function
    loop_line: int | None  # the line of the outermost enclosing loop in that function
    function_self_share: float | None  # that function's own (interpreter) time share from cProfile


@dataclass
class LineReport:
    """Line-level hot spots from a sampling profiler reading ``sys._current_frames()``."""

    samples: int
    interval_ms: float
    lines: list[HotLine]


@dataclass
class WorkerProfile:
    """What one DataLoader worker did, from a cProfile started in its ``worker_init_fn``."""

    worker_id: int
    pid: int
    getitem_calls: int
    getitem_mean_ms: float
    top_function: str


@dataclass
class WorkersReport:
    """Profiles of every DataLoader worker, merged with pstats into one .prof."""

    workers: int
    start_method: str
    batches: int
    per_worker: list[WorkerProfile]
    merged_prof_path: str | None
    top: list[HotFunction]
    main_vs_worker_ratio: float | None  # worker mean __getitem__ / main-process mean


@dataclass
class TransferReport:
    """Cost of moving one collated batch from a worker process to the trainer."""

    batch_size: int
    pickled_bytes: int  # plain pickle of the batch (what a queue would carry without shm)
    tensor_bytes: int  # bytes of tensor storage (DataLoader moves these through shm)
    transfer_ms_per_batch: float  # measured through a real DataLoader with one worker
    throughput_mb_s: float
    method: str  # how it was measured


@dataclass
class GilReport:
    """Same per-sample work on N threads vs N processes: throughput relative to one thread."""

    parallelism: int
    single_items_per_s: float
    thread_scaling: float
    process_scaling: float | None
    gil_wait_share: (
        float | None
    )  # threads' blocked share of (running + blocked) time, beyond one thread alone (Linux schedstat)
    holds_gil: bool
    verdict: str


@dataclass
class DecoderTiming:
    name: str
    ms_per_image: float
    speedup_vs_pil: float


@dataclass
class DecodeReport:
    """Decoders available here, measured on the image files the dataset actually opened."""

    files: int
    decoders: list[DecoderTiming]
    unavailable: list[str]


@dataclass
class Suggestion:
    """What to change, where, and the measurement behind it."""

    kind: str
    where: str
    measured: str
    action: str


@dataclass
class PreprocessReport:
    """Everything ``profile_dataset`` measured. ``to_dict()`` is the JSON written by ``--json``."""

    target: str
    dataset_type: str
    dataset_len: int
    indices: list[int]
    getitem: Distribution | None = None  # wall time per sample, as a DataLoader worker experiences it
    getitem_own: Distribution | None = None  # the same minus time spent waiting for a CPU (busy machine)
    cpu_share: float | None = None  # thread CPU time / own time inside __getitem__ (low: waits on I/O)
    cpu_wait_share: float = 0.0  # share of __getitem__ wall time spent waiting for a CPU (busy machine)
    errors: list[SampleError] = field(default_factory=list)
    collate: Distribution | None = None
    sample_deterministic: bool | None = None
    chain: ChainReport | None = None
    profile: ProfileReport | None = None
    lines: LineReport | None = None
    workers: WorkersReport | None = None
    transfer: TransferReport | None = None
    gil: GilReport | None = None
    decode: DecodeReport | None = None
    suggestions: list[Suggestion] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "supplyline.preprocess/1", **dataclasses.asdict(self)}
