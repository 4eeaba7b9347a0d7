"""The RunRecord: everything one doctor run measured, saved as one versioned JSON file.

Collect writes it, analyze reads it, render draws it; because it is saved, a report can be
re-rendered or compared later without rerunning the job. Times are seconds, sizes bytes, and
``steps`` is columnar (one list per field, one entry per step) to stay small for long runs.
The schema is documented field by field in docs/report-schema.md.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from supplyline import __version__
from supplyline.atomic import atomic_write_json
from supplyline.collect.events import (
    GpuInfo,
    GpuTimeline,
    LineSample,
    LoaderInfo,
    MonitorInfo,
    SamplerInfo,
    SaveEvent,
    TransferStats,
    TrialsInfo,
)
from supplyline.errors import UserError
from supplyline.typed import ShapeError, from_plain, to_plain

SCHEMA_VERSION = 1


@dataclass
class TargetInfo:
    kind: str  # "script", "module" or "library" (supplyline.watch)
    name: str
    args: list[str]
    cwd: str


@dataclass
class HostInfo:
    cpu_count: int
    total_memory_bytes: int
    torch_version: str
    torch_threads: int
    cuda_available: bool
    gpu_names: list[str]
    shm_free_bytes: int | None
    platform: str


@dataclass
class OutcomeInfo:
    exit_code: int
    reason: str  # completed | stopped | exception | sys_exit | interrupted
    stop_message: str | None
    exception_type: str | None
    exception_message: str | None
    traceback: str | None
    wall_s: float


@dataclass
class WhatIfInfo:
    enabled: bool
    ran: bool
    note: str
    steps_requested: int
    compute_only_steps: int = 0
    compute_only_step_s: float | None = None  # median step time while the last batch was replayed
    loader_only_batches: int = 0
    loader_only_batches_per_s: float | None = None  # the training loader drained with no consumer


@dataclass
class RunRecord:
    schema_version: int
    supplyline_version: str
    created_unix_s: float
    target: TargetInfo
    host: HostInfo
    outcome: OutcomeInfo
    # Columnar: one list per field (``duration_s``, ``<phase>_s``, ``whatif``…), one entry per step.
    steps: dict[str, list[float]]
    outside_steps_s: dict[str, float]
    train_loader_id: int | None
    loaders: list[LoaderInfo]
    transfers: TransferStats
    saves: list[SaveEvent]
    logging_calls: int
    line_samples: list[LineSample]
    sampler: SamplerInfo
    whatif: WhatIfInfo
    monitor: MonitorInfo
    gpu: GpuInfo
    notes: list[str] = field(default_factory=list)
    # Under torchrun: rank, world size, node, job key and collective counters (None for one process).
    distributed: dict[str, Any] | None = None
    # On CUDA: the per-step CUDA events and host phase intervals GPU idle time is attributed from
    # (None in records written before it existed, or by a session that did not try).
    gpu_timeline: GpuTimeline | None = None
    # The doctor's fix trials (steps labelled 2 in ``steps.whatif``); empty in records from before them.
    trials: TrialsInfo = field(default_factory=TrialsInfo)

    def to_dict(self) -> dict[str, Any]:
        plain: dict[str, Any] = to_plain(self)  # a dataclass always becomes a dict
        return plain

    @classmethod
    def from_dict(cls, data: Any) -> RunRecord:
        """Build and validate a record from its JSON form; a wrong shape is one line naming the field."""
        if not isinstance(data, dict):
            raise UserError("not a supplyline run record (expected a JSON object)")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise UserError(
                f"record schema version {version!r} is not supported: this supplyline reads version {SCHEMA_VERSION} "
                "(written by supplyline 0.1 and later)"
            )
        try:
            record = from_plain(cls, data)
        except ShapeError as exc:
            raise UserError(f"record field '{exc.path}' is malformed: {exc.message}") from exc
        record.check_steps()
        return record

    def check_steps(self) -> None:
        """The step columns must be the same length and finite: a CI gate must never pass on NaN."""
        lengths = {len(v) for v in self.steps.values()}
        if len(lengths) > 1:
            raise UserError("record field 'steps' is malformed: its columns have different lengths")
        for name, values in self.steps.items():
            if not all(math.isfinite(v) for v in values):
                raise UserError(f"record field 'steps.{name}' is malformed: it holds a non-finite number")
        for name in ("duration_s", "start_s", "whatif"):
            if lengths and lengths != {0} and name not in self.steps:
                raise UserError(f"record field 'steps.{name}' is missing")

    def save(self, directory: str) -> str:
        path = os.path.join(directory, "record.json")
        atomic_write_json(path, self.to_dict())
        return path

    @cached_property
    def observed_steps(self) -> list[int]:
        """Indices of the steps that ran unchanged (not what-if replays, not fix trials)."""
        return [i for i, w in enumerate(self.steps.get("whatif", [])) if not w]

    @property
    def train_loader(self) -> LoaderInfo | None:
        return next((loader for loader in self.loaders if loader.role == "train"), None)


def load_record(path_or_dir: str) -> RunRecord:
    path = os.path.join(path_or_dir, "record.json") if os.path.isdir(path_or_dir) else path_or_dir
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError as exc:
        raise UserError(f"no run record at {path} (run `supplyline doctor` first)") from exc
    except IsADirectoryError as exc:
        raise UserError(f"{path} is a directory without a record.json (run `supplyline doctor` first)") from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not a supplyline run record (not UTF-8 text)") from exc
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path} is not a supplyline run record (not valid JSON: {exc.msg} at line {exc.lineno})"
        ) from exc
    except OSError as exc:
        raise UserError(f"cannot read run record {path}: {exc.strerror or exc}") from exc
    return RunRecord.from_dict(data)


def new_version_fields() -> dict[str, Any]:
    import time

    return {"schema_version": SCHEMA_VERSION, "supplyline_version": __version__, "created_unix_s": time.time()}
