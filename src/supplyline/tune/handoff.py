"""Two host facts the capping model needs, measured once per tune run.

- The cost, per byte, of receiving a batch from a DataLoader worker on the training thread: the
  unpickling, the mapping of the worker's shared memory and the first touch of its pages. A
  one-worker loader makes a few 4 MiB tensors ahead of time (the prefetch queue holds them all);
  we then time taking each one and reading a byte of every page, and divide by its size.
- The cores other processes keep busy: the host's busy CPU time minus our own over a window.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import psutil
from torch.utils.data import DataLoader, Dataset

PROBE_BYTES = 4 << 20
PROBE_BATCHES = 6
PAGE = 4096


class _Blobs(Dataset[Any]):
    """A map-style dataset of fresh ``PROBE_BYTES`` tensors: what a worker's collate hands over."""

    def __len__(self) -> int:
        return PROBE_BATCHES

    def __getitem__(self, index: int) -> Any:
        import torch

        return torch.full((PROBE_BYTES,), index % 251, dtype=torch.uint8)


def handoff_s_per_byte() -> float:
    """Seconds per byte the training thread spends receiving a batch from a worker; 0.0 if the probe fails."""
    try:
        loader: DataLoader[Any] = DataLoader(_Blobs(), batch_size=None, num_workers=1, prefetch_factor=PROBE_BATCHES)
        iterator = iter(loader)
        first = next(iterator)  # the worker has started; give it time to queue the rest
        time.sleep(0.05 + 0.01 * PROBE_BATCHES)
        costs = []
        for _ in range(PROBE_BATCHES - 1):
            start = time.perf_counter()
            batch = next(iterator)
            int(batch[::PAGE].sum())  # the first touch of each page is part of receiving it
            costs.append((time.perf_counter() - start) / PROBE_BYTES)
        del iterator, first
        return sorted(costs)[len(costs) // 2]
    except Exception:  # a sandbox without shared memory: the model goes on without this cap
        return 0.0


def other_cores_busy(measure: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``measure()`` and return its result with the cores other processes kept busy meanwhile."""
    own = psutil.Process(os.getpid())
    host0, own0, wall0 = psutil.cpu_times(), own.cpu_times(), time.perf_counter()
    result = measure()
    host1, own1, wall1 = psutil.cpu_times(), own.cpu_times(), time.perf_counter()
    wall = wall1 - wall0
    if wall <= 0:
        return result, 0.0
    busy = _busy(host1) - _busy(host0)
    mine = (own1.user + own1.system + own1.children_user + own1.children_system) - (
        own0.user + own0.system + own0.children_user + own0.children_system
    )
    return result, max(0.0, (busy - mine) / wall)


def _busy(times: Any) -> float:
    idle = times.idle + getattr(times, "iowait", 0.0)
    return sum(times) - idle
