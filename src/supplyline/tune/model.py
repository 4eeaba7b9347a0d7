"""A throughput model from a cheap probe: where the search should start looking.

Loader throughput with ``w`` workers saturates at whichever is smallest of
  * the consumer's rate                      (the training step eats no faster),
  * the per-worker rate times ``w``          (each worker makes one batch at a time),
  * the cores bound                          (CPU seconds per batch, shared over the usable cores).
A worker that mostly waits on storage uses little CPU, so its cores bound is far above the cores
count times the per-worker rate: that is why the model sends I/O-bound datasets past the cores.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from supplyline.errors import UserError
from supplyline.tune.consumer import Consumer, measure_consumer
from supplyline.tune.space import LoaderConfig
from supplyline.tune.target import TuneTarget, item_error_in


@dataclass
class ThroughputModel:
    batch_size: int
    batch_wall_s: float  # one batch made in one process (fetch + collate)
    batch_cpu_s: float  # CPU seconds that batch took
    consumer_wall_s: float  # the consumer alone, per batch
    consumer_cpu_s: float  # CPU the consumer burns in the main process, per batch
    cores: int

    def consumer_rate(self) -> float:
        return self.batch_size / self.consumer_wall_s if self.consumer_wall_s > 0 else math.inf

    def cores_bound(self) -> float:
        cpu = self.batch_cpu_s + self.consumer_cpu_s
        return self.cores * self.batch_size / cpu if cpu > 0 else math.inf

    def predict(self, workers: int) -> float:
        """Predicted samples/s with ``workers`` DataLoader workers."""
        if workers == 0:  # loading and consuming take turns in one process
            return self.batch_size / max(self.batch_wall_s + self.consumer_wall_s, 1e-9)
        per_worker = self.batch_size / max(self.batch_wall_s, 1e-9)
        return min(self.consumer_rate(), per_worker * workers, self.cores_bound())

    def knee(self, ladder: list[int], reach: float = 0.95) -> int:
        """The fewest workers predicted to reach ``reach`` of the best predicted rate."""
        best = max(self.predict(w) for w in ladder)
        return next(w for w in ladder if self.predict(w) >= reach * best)

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "batch_wall_s": self.batch_wall_s,
            "batch_cpu_s": self.batch_cpu_s,
            "consumer_wall_s": self.consumer_wall_s,
            "consumer_cpu_s": self.consumer_cpu_s,
            "cores": self.cores,
            "consumer_rate": _finite(self.consumer_rate()),
            "cores_bound": _finite(self.cores_bound()),
        }


def _finite(x: float) -> float | None:
    return None if math.isinf(x) else x


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """DataLoader workers run with one torch thread; the probe must too, or it over-promises."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def probe(
    target: TuneTarget, consumer: Consumer, batch_size: int, cores: int, max_batches: int = 6, max_s: float = 1.5
) -> ThroughputModel:
    """Load a few batches in this process (which also checks the dataset) and time the consumer."""
    loader = target.make_loader(LoaderConfig(batch_size=batch_size))
    walls: list[float] = []
    cpus: list[float] = []
    batch: Any = None
    start = time.perf_counter()
    with _one_thread():
        iterator = iter(loader)
        while len(walls) < max_batches and (len(walls) < 2 or time.perf_counter() - start < max_s):
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                batch = next(iterator)
            except StopIteration:
                if walls:
                    break
                raise UserError(f"{target.spec} produced no batch of {batch_size}: it is empty") from None
            except Exception as exc:
                raise dataset_error(target, exc) from exc
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
    cost = measure_consumer(consumer, batch)
    # The first batch pays one-off costs (opening files, imports): use the rest when there is a rest.
    steady_w = walls[1:] or walls
    steady_c = cpus[1:] or cpus
    return ThroughputModel(
        batch_size=batch_size,
        batch_wall_s=_median(steady_w),
        batch_cpu_s=_median(steady_c),
        consumer_wall_s=cost.wall_s,
        consumer_cpu_s=cost.cpu_s,
        cores=cores,
    )


def dataset_error(target: TuneTarget, exc: BaseException) -> UserError:
    """A one-line UserError for a dataset that fails, naming the item when we know it."""
    found = item_error_in(exc)
    if found:
        return UserError(f"{target.spec}: {found}")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return UserError(f"loading {target.spec} failed: {type(exc).__name__}: {first}")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
