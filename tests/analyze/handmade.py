"""Hand-built run records for the analysis tests: every figure chosen, no training run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from supplyline.collect.events import (
    GpuInfo,
    GpuTimeline,
    HostInterval,
    LineSample,
    LoaderInfo,
    MonitorInfo,
    SamplerInfo,
    SaveEvent,
    StepGpuMarks,
    SyncLine,
    SyncPoint,
    TransferStats,
)
from supplyline.collect.samples import CpuSample, MemorySample, ProcessSample, Sample
from supplyline.record import HostInfo, OutcomeInfo, RunRecord, TargetInfo, WhatIfInfo


def loader(num_workers: int = 0, **kw: Any) -> LoaderInfo:
    fields: dict[str, Any] = dict(
        loader_id=1,
        batch_size=32,
        num_workers=num_workers,
        pin_memory=False,
        prefetch_factor=2 if num_workers else None,
        persistent_workers=False,
        multiprocessing_context=None,
        dataset_type="ToyDataset",
        dataset_len=1000,
        dataset_module="toy",
        role="train",
    )
    fields.update(kw)
    return LoaderInfo(**fields)


def sample(
    t: float, worker_cpu: list[float] | None = None, load: float = 1.0, swap: float = 0.0, busy_pct: float = 50.0
) -> Sample:
    procs = [ProcessSample(100, 1, "python", "root", 95.0, 1 << 28, "R", None, None)]
    for k, cpu in enumerate(worker_cpu or []):
        procs.append(ProcessSample(200 + k, 100, "python", "child", cpu, 1 << 27, "R", None, None))
    return Sample(
        time_unix_s=t,
        elapsed_s=t - 1000.0,
        cpu=CpuSample(busy_pct, [busy_pct, busy_pct], 40.0, 10.0, 0.0, load, load, load),
        memory=MemorySample(8 << 30, 4 << 30, 4 << 30, 1 << 30, 0, swap, swap),
        processes=procs,
    )


def record(
    steps: int = 20,
    step_s: float = 0.010,
    data_wait: float = 0.0,
    transfer: float = 0.0,
    logging: float = 0.0,
    checkpoint: float = 0.0,
    compute_hooked: float | None = None,
    collective: float = 0.0,
    evaluating: float = 0.0,
    durations: list[float] | None = None,
    wait_cpu_ratio: float = 1.0,
    loaders: list[LoaderInfo] | None = None,
    cpu_count: int = 2,
    torch_threads: int = 1,
    line_samples: list[LineSample] | None = None,
    saves: list[SaveEvent] | None = None,
    transfers: TransferStats | None = None,
    gpu: GpuInfo | None = None,
    whatif: WhatIfInfo | None = None,
    whatif_steps: int = 0,
    monitor: list[Sample] | None = None,
    logging_calls: int = 0,
    shm_free_bytes: int | None = 1 << 30,
    gpu_timeline: GpuTimeline | None = None,
    outcome: OutcomeInfo | None = None,
) -> RunRecord:
    """``steps`` observed steps of ``step_s`` each with the given seconds per phase; by default all of
    the hooked-free rest is hooked compute (the backward and optimizer step)."""
    hooked = data_wait + transfer + logging + checkpoint + collective + evaluating
    compute = step_s - hooked if compute_hooked is None else compute_hooked
    n = steps + whatif_steps
    cols: dict[str, list[float]] = {
        "start_s": [i * step_s for i in range(n)],
        # ``durations``: the observed steps' own times (their spread), the rest of each is unhooked
        "duration_s": (durations or [step_s] * steps) + [step_s] * whatif_steps,
        "data_wait_s": [data_wait] * steps + [0.0] * whatif_steps,
        "transfer_s": [transfer] * n,
        "logging_s": [logging] * n,
        "checkpoint_s": [checkpoint] * n,
        "compute_hooked_s": [compute] * n,
        "collective_s": [collective] * n,
        "eval_s": [evaluating] * n,
        "batches": [1.0] * n,
        "h2d_bytes": [0.0] * n,
        "data_wait_cpu_s": [data_wait * wait_cpu_ratio] * n,
        "cpu_s": [step_s] * n,
        "whatif": [0.0] * steps + [1.0] * whatif_steps,
    }
    return RunRecord(
        schema_version=1,
        supplyline_version="test",
        created_unix_s=1000.0,
        target=TargetInfo("script", "train.py", [], "/tmp"),
        host=HostInfo(
            cpu_count, 8 << 30, "2.13.0", torch_threads, gpu_timeline is not None, [], shm_free_bytes, "Linux test"
        ),
        outcome=outcome or OutcomeInfo(0, "stopped", "stopped after N steps", None, None, None, n * step_s),
        steps=cols,
        outside_steps_s={},
        train_loader_id=1 if loaders is None or loaders else None,
        loaders=[loader()] if loaders is None else loaders,
        transfers=transfers or TransferStats(),
        saves=saves or [],
        logging_calls=logging_calls,
        line_samples=line_samples or [],
        sampler=SamplerInfo(0.04, sum(s.samples for s in line_samples or []), 0.01),
        whatif=whatif or WhatIfInfo(enabled=False, ran=False, note="off", steps_requested=0),
        monitor=MonitorInfo(1.0, monitor or [], None, 1000.0),
        gpu=gpu or GpuInfo(available=False),
        gpu_timeline=gpu_timeline,
    )


def timeline(
    steps: int,
    step_s: float,
    busy: tuple[float, float],
    queued: float,
    phases: Sequence[tuple[str, float, float]] = (),
    syncs: Sequence[tuple[float, str]] = (),
) -> GpuTimeline:
    """CUDA marks for ``steps`` steps of ``step_s`` laid end to end from 0 (as ``record`` lays them):
    in each, the GPU is busy from ``busy[0]`` to ``busy[1]`` seconds after the step's start (past
    ``step_s``: the CPU ran ahead and the work spills into the next step), the host queued the
    step's last work at ``queued``, and the training thread was in each ``(phase, from, to)``."""
    marks: list[StepGpuMarks] = []
    ivs: list[HostInterval] = []
    pts: list[SyncPoint] = []
    for i in range(steps):
        t = i * step_s
        marks.append(StepGpuMarks(i, t, t + step_s, t + busy[0], t + busy[1], t + queued))
        ivs.extend(HostInterval(p, t + a, t + b) for p, a, b in phases)
        pts.extend(SyncPoint(t + a, where) for a, where in syncs)
    return GpuTimeline(available=True, device=0, alignment_host_s=0.0, marks=marks, intervals=ivs, syncs=pts)


def line(phase: str, category: str, file: str, lineno: int, samples: int) -> LineSample:
    return LineSample(phase, category, file, lineno, "fn", samples)


def lib_line(file: str, lineno: int, samples: int, library: str = "", function: str = "fn") -> LineSample:
    """A data-wait sample on the user's line ``lineno``, inside ``library`` ("file:line:function") when given."""
    return LineSample("data_wait", "user", file, lineno, function, samples, library, library)


def save(
    start_s: float,
    duration_s: float,
    step: int = 0,
    files: list[str] | None = None,
    nbytes: int | None = None,
    caller: str = "",
    user_caller: str = "",
    stack: list[str] | None = None,
    kind: str = "torch.save",
) -> SaveEvent:
    return SaveEvent(
        kind,
        start_s,
        duration_s,
        (files or ["ckpt.pt"])[0],
        True,
        step=step,
        files=files or [],
        bytes=nbytes,
        caller=caller,
        user_caller=user_caller,
        stack=stack or [],
    )


__all__ = [
    "GpuInfo",
    "GpuTimeline",
    "OutcomeInfo",
    "SyncLine",
    "TransferStats",
    "WhatIfInfo",
    "lib_line",
    "line",
    "loader",
    "record",
    "sample",
    "save",
    "timeline",
]
