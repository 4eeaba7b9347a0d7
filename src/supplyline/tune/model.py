"""A throughput model from a cheap probe: where the search should start looking, and why more
workers stop helping.

Loader throughput with ``w`` workers saturates at whichever is smallest of (analyze/capacity.py)
  * the consumer's rate plus receiving each batch from a worker (the hand-off, per byte measured),
  * the per-worker rate times ``w``          (each worker makes one batch at a time),
  * the cores bound                          (CPU seconds per batch over the cores others leave free).
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

from supplyline.analyze.capacity import Pipeline, batch_rate, caps, explain
from supplyline.errors import UserError
from supplyline.fixes._snapshot import tensor_bytes
from supplyline.tune.consumer import Consumer, measure_consumer
from supplyline.tune.handoff import other_cores_busy
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
    batch_bytes: int = 0  # tensor bytes in one batch: what a worker hands to the trainer
    handoff_s_per_byte: float = 0.0  # measured once per run (tune/handoff.py)
    other_cores_busy: float = 0.0  # cores other processes used while the probe ran

    def pipeline(self) -> Pipeline:
        return Pipeline(
            cores=self.cores,
            batch_wall_s=self.batch_wall_s,
            batch_cpu_s=self.batch_cpu_s,
            step_wall_s=self.consumer_wall_s,
            step_cpu_s=self.consumer_cpu_s,
            batch_bytes=self.batch_bytes,
            handoff_s_per_byte=self.handoff_s_per_byte,
            other_cores_busy=self.other_cores_busy,
        )

    def consumer_rate(self) -> float:
        return self.batch_size / self.consumer_wall_s if self.consumer_wall_s > 0 else math.inf

    def cores_bound(self) -> float:
        cap = next(c for c in caps(self.pipeline(), 1) if c.name == "cores")
        return self.batch_size * cap.batches_per_s

    def predict(self, workers: int) -> float:
        """Predicted samples/s with ``workers`` DataLoader workers."""
        return self.batch_size * min(batch_rate(self.pipeline(), workers), 1e9)

    def capped_by(self, ladder: list[int]) -> str | None:
        """``past 4 workers the rate is capped by the 2 cores (...)``, or None."""
        return explain(self.pipeline(), ladder)

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
            "batch_bytes": self.batch_bytes,
            "handoff_s_per_byte": self.handoff_s_per_byte,
            "other_cores_busy": round(self.other_cores_busy, 3),
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
    target: TuneTarget,
    consumer: Consumer,
    batch_size: int,
    cores: int,
    max_batches: int = 6,
    max_s: float = 1.5,
    handoff_s_per_byte: float = 0.0,
) -> ThroughputModel:
    """Load a few batches in this process (which also checks the dataset) and time the consumer;
    the cores other processes use are measured meanwhile (no worker of ours runs then)."""
    (walls, cpus, batch), others = other_cores_busy(lambda: _load_some(target, batch_size, max_batches, max_s))
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
        batch_bytes=tensor_bytes(batch),
        handoff_s_per_byte=handoff_s_per_byte,
        other_cores_busy=others,
    )


def _load_some(
    target: TuneTarget, batch_size: int, max_batches: int, max_s: float
) -> tuple[list[float], list[float], Any]:
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
                raise dataset_error(target, exc, batch_size) from exc
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
    return walls, cpus, batch


def dataset_error(target: TuneTarget, exc: BaseException, batch_size: int = 0) -> UserError:
    """A one-line UserError for a dataset that fails, naming the item when we know it."""
    found = item_error_in(exc)
    if found:
        return UserError(f"{target.spec}: {found}")
    none_at = _first_none_item(target, batch_size)
    if none_at is not None:
        return UserError(
            f"{target.spec}: dataset[{none_at}] returned None, which the DataLoader cannot batch; return a "
            "sample, or drop bad items with a collate_fn that filters out None"
        )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return UserError(f"loading {target.spec} failed: {type(exc).__name__}: {first}")


def _first_none_item(target: TuneTarget, batch_size: int) -> int | None:
    """Only after a failure: the first index of the first batch whose item is None, if any."""
    inner = getattr(target.dataset, "dataset", None)
    if inner is None or target.length is None or "sampler" in target.loader_kwargs:
        return None
    for index in range(min(batch_size, target.length)):
        try:
            if inner[index] is None:
                return index
        except Exception:
            return None
    return None


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
