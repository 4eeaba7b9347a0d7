"""The RunRecord: everything one doctor run measured, saved as one versioned JSON file.

Collect writes it, analyze reads it, render draws it; because it is saved, a report can be
re-rendered or compared later without rerunning the job. Times are seconds, sizes bytes, and
``steps`` is columnar (one list per field, one entry per step) to stay small for long runs.
The schema is documented field by field in docs/report-schema.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, asdict, dataclass, field, fields
from functools import cached_property
from typing import Any

from supplyline import __version__
from supplyline.atomic import atomic_write_json
from supplyline.errors import UserError

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
    steps: dict[str, list[float]]
    outside_steps_s: dict[str, float]
    train_loader_id: int | None
    loaders: list[dict[str, Any]]
    transfers: dict[str, Any]
    saves: list[dict[str, Any]]
    logging_calls: int
    line_samples: list[dict[str, Any]]
    sampler: dict[str, Any]
    whatif: WhatIfInfo
    monitor: dict[str, Any]
    gpu: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    # Under torchrun: rank, world size, node, job key and collective counters (None for one process).
    distributed: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        if not isinstance(data, dict):
            raise UserError("not a supplyline run record (expected a JSON object)")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise UserError(
                f"record schema version {version} is not supported (this supplyline reads {SCHEMA_VERSION})"
            )
        nested = {"target": TargetInfo, "host": HostInfo, "outcome": OutcomeInfo, "whatif": WhatIfInfo}
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                if f.default is not MISSING or f.default_factory is not MISSING:
                    continue  # a field added later, with a default: older records still load
                raise UserError(f"record is missing '{f.name}'")
            value = data[f.name]
            try:
                kwargs[f.name] = nested[f.name](**value) if f.name in nested else value
            except TypeError as exc:  # a hand-edited or foreign file: one line, not a traceback
                raise UserError(f"record field '{f.name}' is malformed ({exc})") from exc
        return cls(**kwargs)

    def save(self, directory: str) -> str:
        path = os.path.join(directory, "record.json")
        atomic_write_json(path, self.to_dict())
        return path

    @cached_property
    def observed_steps(self) -> list[int]:
        """Indices of the steps that ran unchanged (not what-if replays)."""
        return [i for i, w in enumerate(self.steps.get("whatif", [])) if not w]


def load_record(path_or_dir: str) -> RunRecord:
    path = os.path.join(path_or_dir, "record.json") if os.path.isdir(path_or_dir) else path_or_dir
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError as exc:
        raise UserError(f"no run record at {path} (run `supplyline doctor` first)") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read run record {path}: {exc}") from exc
    return RunRecord.from_dict(data)


def new_version_fields() -> dict[str, Any]:
    import time

    return {"schema_version": SCHEMA_VERSION, "supplyline_version": __version__, "created_unix_s": time.time()}
