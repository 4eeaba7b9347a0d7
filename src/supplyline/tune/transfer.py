"""Host-to-device copies of the dataset's real batches: pageable vs pinned, blocking vs
non_blocking, in GB/s, set against the consumer's time per batch (the pin_memory checkpoint of
docs/how-it-works.md)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NO_CUDA = "transfer: not available (no CUDA device on this machine); host-to-device copies not measured"


@dataclass
class TransferResult:
    mode: str  # pageable/blocking, pinned/blocking, pinned/non_blocking
    bytes_per_batch: int
    seconds_per_batch: float

    @property
    def gb_per_s(self) -> float:
        return self.bytes_per_batch / self.seconds_per_batch / 1e9 if self.seconds_per_batch else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "bytes_per_batch": self.bytes_per_batch,
            "ms_per_batch": round(self.seconds_per_batch * 1e3, 4),
            "gb_per_s": round(self.gb_per_s, 3),
        }


def tensors_of(batch: Any) -> list[Any]:
    import torch

    found, stack = [], [batch]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def measure_transfer(batches: list[Any], repeats: int = 5) -> list[TransferResult]:
    """Copy each batch to the GPU in the three modes; median seconds per batch. Needs CUDA."""
    import torch

    device = torch.device("cuda")
    host = [tensors_of(b) for b in batches]
    pinned = [[t.pin_memory() for t in ts] for ts in host]
    size = int(statistics.mean(sum(t.numel() * t.element_size() for t in ts) for ts in host))

    def timed(source: list[list[Any]], non_blocking: bool) -> float:
        times = []
        for _ in range(repeats):
            for ts in source:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for t in ts:
                    t.to(device, non_blocking=non_blocking)
                torch.cuda.synchronize()  # the copy is done only when the stream says so
                times.append(time.perf_counter() - t0)
        return statistics.median(times)

    timed(host, False)  # first copies pay context and allocator set-up
    return [
        TransferResult("pageable/blocking", size, timed(host, False)),
        TransferResult("pinned/blocking", size, timed(pinned, False)),
        TransferResult("pinned/non_blocking", size, timed(pinned, True)),
    ]


def transfer_lines(results: list[TransferResult], consumer_s: float) -> list[str]:
    lines = []
    for r in results:
        lines.append(f"transfer {r.mode:<20} {r.gb_per_s:6.2f} GB/s  {r.seconds_per_batch * 1e3:8.3f} ms per batch")
    best = min(results, key=lambda r: r.seconds_per_batch)
    if consumer_s > 0:
        share = best.seconds_per_batch / consumer_s
        lines.append(
            f"transfer: the fastest copy is {share:.0%} of the consumer's {consumer_s * 1e3:.1f} ms per "
            "batch"
            + (
                "; with pin_memory=True and non_blocking=True it overlaps the step"
                if share < 1
                else "; copies alone outlast the step: the link is the bottleneck"
            )
        )
    return lines


def run_transfer(
    make_batches: Callable[[], list[Any]], consumer_s: float, cuda: bool
) -> tuple[list[str], list[dict[str, Any]]]:
    if not cuda:
        return [NO_CUDA], []
    results = measure_transfer(make_batches())
    return transfer_lines(results, consumer_s), [r.to_json() for r in results]
