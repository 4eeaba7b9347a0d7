"""The search space: one DataLoader configuration, and the ladders of values the tuner may try."""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class LoaderConfig:
    """The DataLoader settings the tuner varies. ``start_method=None`` means the platform default."""

    batch_size: int
    num_workers: int = 0
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    pin_memory: bool = False
    start_method: str | None = None

    def normalized(self) -> LoaderConfig:
        """With no workers, prefetch/persistence/start method do not exist: drop them so equal
        loaders compare equal (PyTorch rejects prefetch_factor without workers)."""
        if self.num_workers == 0:
            return replace(self, prefetch_factor=None, persistent_workers=False, start_method=None)
        if self.prefetch_factor is None:
            return replace(self, prefetch_factor=2)  # PyTorch's default once workers exist
        return self

    def loader_kwargs(self) -> dict[str, Any]:
        c = self.normalized()
        kwargs: dict[str, Any] = {"batch_size": c.batch_size, "num_workers": c.num_workers, "pin_memory": c.pin_memory}
        if c.num_workers > 0:
            kwargs.update(prefetch_factor=c.prefetch_factor, persistent_workers=c.persistent_workers)
            if c.start_method:
                kwargs["multiprocessing_context"] = c.start_method
        return kwargs

    def code(self, dataset_name: str = "ds") -> str:
        """The paste-ready call, naming only what differs from PyTorch's defaults."""
        c = self.normalized()
        parts = [dataset_name, f"batch_size={c.batch_size}"]
        if c.num_workers:
            parts.append(f"num_workers={c.num_workers}")
            parts.append(f"prefetch_factor={c.prefetch_factor}")
            if c.persistent_workers:
                parts.append("persistent_workers=True")
            if c.start_method and c.start_method != default_start_method():
                parts.append(f'multiprocessing_context="{c.start_method}"')
        if c.pin_memory:
            parts.append("pin_memory=True")
        return f"DataLoader({', '.join(parts)})"

    def label(self) -> str:
        c = self.normalized()
        if c.num_workers == 0:
            return f"b{c.batch_size} w0"
        text = f"b{c.batch_size} w{c.num_workers} pf{c.prefetch_factor}"
        text += " persistent" if c.persistent_workers else ""
        text += " pinned" if c.pin_memory else ""
        if c.start_method and c.start_method != default_start_method():
            text += f" {c.start_method}"
        return text

    def to_json(self) -> dict[str, Any]:
        return asdict(self.normalized())


def usable_cores() -> int:
    """Cores this process may run on (affinity and container limits), not the host's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def default_start_method() -> str:
    return multiprocessing.get_start_method(allow_none=False)


def worker_ladder(cores: int, max_workers: int | None = None) -> list[int]:
    """0, then every count up to a little past the cores, then steps of about a third.

    It goes well past the cores on purpose: workers that wait on storage latency use little CPU,
    so more of them than cores keeps more reads in flight.
    """
    top = max_workers if max_workers is not None else min(max(8 * cores, 8), 64)
    ladder = list(range(0, min(top, cores + 2) + 1))
    value = ladder[-1]
    while value < top:
        value = min(top, max(value + 1, round(value * 4 / 3)))
        ladder.append(value)
    return ladder


PREFETCH_LADDER: tuple[int, ...] = (2, 4, 8)
