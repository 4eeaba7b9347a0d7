"""What eats the batches: nothing, a synthetic per-batch cost, or the user's own function."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from supplyline.errors import UserError
from supplyline.target import load_attr


@dataclass
class Consumer:
    """A per-batch cost applied in the main process, as a training step would be.

    The synthetic cost sleeps rather than spins: it stands for an accelerator step, during which
    the host CPU is free for the loader's workers.
    """

    description: str
    fn: Callable[[Any], Any] | None = None
    sleep_s: float = 0.0

    def __call__(self, batch: Any) -> None:
        if self.sleep_s > 0:
            time.sleep(self.sleep_s)
        if self.fn is not None:
            self.fn(batch)

    @property
    def active(self) -> bool:
        return self.fn is not None or self.sleep_s > 0


def make_consumer(consumer_ms: float | None, consumer_spec: str | None) -> Consumer:
    if consumer_ms is not None:
        if consumer_ms < 0:
            raise UserError(f"--consumer-ms must be 0 or more, not {consumer_ms}")
        return Consumer(description=f"synthetic {consumer_ms:g} ms per batch", sleep_s=consumer_ms / 1e3)
    if consumer_spec:
        fn = load_attr(consumer_spec)
        if not callable(fn):
            raise UserError(f"--consumer {consumer_spec} is a {type(fn).__name__}, not a function taking a batch")
        return Consumer(description=f"{consumer_spec}(batch)", fn=fn)
    return Consumer(description="none (the loader alone)")


@dataclass
class ConsumerCost:
    """The consumer alone on one real batch, repeated: its wall and CPU seconds per batch."""

    wall_s: float
    cpu_s: float


def measure_consumer(consumer: Consumer, batch: Any, repeats: int = 5) -> ConsumerCost:
    if not consumer.active:
        return ConsumerCost(0.0, 0.0)
    try:
        consumer(batch)  # the first call may compile or allocate: not counted
        walls, cpus = [], []
        for _ in range(repeats):
            w0, c0 = time.perf_counter(), time.process_time()
            consumer(batch)
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
    except Exception as exc:
        raise UserError(f"the consumer {consumer.description} raised {type(exc).__name__}: {exc}") from exc
    walls.sort()
    cpus.sort()
    return ConsumerCost(walls[len(walls) // 2], cpus[len(cpus) // 2])
