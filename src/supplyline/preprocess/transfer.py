"""What it costs to move one collated batch from a worker process to the trainer.

Measured, not estimated: a real DataLoader with one worker hands over fresh copies of the batch,
each stamped with ``perf_counter()`` as it leaves ``__getitem__``; the trainer subtracts the stamp
from its own clock on arrival (CLOCK_MONOTONIC is shared by all processes of a machine). That span
is the hand-over: tensor storage into shared memory, pickling, the pipe, rebuilding in the trainer.
The trainer does nothing else, so batches do not queue up behind each other.
"""

from __future__ import annotations

import copy
import pickle
import statistics
import time
from typing import Any

from supplyline.preprocess.report import TransferReport


class RepeatBatch:
    """Dataset of ``count`` fresh deep copies of one batch (fresh: shared memory is not reused)."""

    def __init__(self, batch: Any, count: int) -> None:
        self.batch = batch
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> Any:
        fresh = copy.deepcopy(self.batch)
        return fresh, time.perf_counter()


def tensor_bytes(value: Any) -> int:
    """Bytes of tensor storage in a (nested) batch."""
    if hasattr(value, "element_size") and hasattr(value, "nelement"):
        return int(value.element_size() * value.nelement())
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    return 0


def measure_transfer(
    batch: Any, batch_size: int, start_method: str | None, batches: int = 12, warmup: int = 2
) -> TransferReport:
    """Pickled size and measured worker->trainer hand-over time of ``batch``; raises if it cannot be pickled."""
    import torch.utils.data as tud

    pickled = len(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))
    loader: tud.DataLoader[Any] = tud.DataLoader(
        RepeatBatch(  # type: ignore[arg-type]  # a map-style dataset by protocol, not by subclass
            batch, batches + warmup
        ),
        batch_size=None,
        num_workers=1,
        multiprocessing_context=start_method,
        prefetch_factor=2,
        timeout=300,
    )
    spans = []
    for n, (_, sent) in enumerate(loader):
        if n >= warmup:
            spans.append((time.perf_counter() - sent) * 1e3)
    handover_ms = statistics.median(spans) if spans else 0.0
    size = tensor_bytes(batch) or pickled
    return TransferReport(
        batch_size=batch_size,
        pickled_bytes=pickled,
        tensor_bytes=tensor_bytes(batch),
        transfer_ms_per_batch=handover_ms,
        throughput_mb_s=(size / 1e6) / (handover_ms / 1e3) if handover_ms > 0 else 0.0,
        method=f"DataLoader, 1 worker ({start_method or 'default'} start), median of "
        f"{len(spans)} batches, stamped in the worker, read in the trainer",
    )
