"""How fast an input pipeline can go with ``w`` DataLoader workers, and what stops it going faster.

A pure model over per-batch costs measured on the job (``tune``'s probe, or the doctor's record).
The batch rate is the smallest of these caps:

- ``workers``: each worker makes one batch at a time: ``w / batch_wall_s``;
- ``trainer``: the training thread consumes one batch per step and also receives it from the
  worker (unpickling, mapping the shared memory, first touch of its pages):
  ``1 / (step_wall_s + handoff_s)``; named ``handoff`` when receiving is a quarter of that or more.
  When the step runs torch's intra-op threads (``step_intra_cpu_s``) and they, the training thread
  and the workers need more cores than there are, the step runs as if on one core:
  ``1 / (step_cpu_s + step_intra_cpu_s + handoff_s)`` (named ``threads``). A parallel region waits
  for its slowest thread, so a thread a worker displaces holds the whole region: a conv net on both
  of 2 cores with 1 ms of per-sample work ran 1.10-1.12x with a worker, where sharing the cores
  fairly predicts 1.4x and one core 1.11x (benchmarks/prediction_accuracy.py);
- ``cores``: every batch costs CPU in a worker, in the training step and in the hand-off, and
  other processes already use some of the cores: ``cores_for_job / cpu_per_batch``, the cores left
  while the host has room, a fair share per runnable thread once it is crowded;
- ``disk``: the bytes a batch reads, against what the storage delivers minus what others read.

With no workers, loading and the training step take turns on one thread: ``1 / (batch_wall_s +
step_wall_s)``, with no hand-off. Nothing here imports torch, tune or the doctor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from supplyline.units import human_bytes

MIN_FREE_CORES = 0.25
# The step's intra-op threads count from this many cores on: below it they are mostly idle (a
# small model's ops too short to split) and a displaced one costs little.
MIN_INTRA_OP_CORES = 0.25
# ... and only where their CPU per batch is this share of a batch's time or more: beside a step of
# a fraction of a millisecond they cannot hold the rate.
MIN_INTRA_OP_SHARE = 0.1
HANDOFF_NAMED_SHARE = 0.25  # receiving batches is named as the cap from this share of the trainer's time on


@dataclass(frozen=True)
class Pipeline:
    """Per-batch costs (seconds, bytes) and the host's resources; zero or None: not measured."""

    cores: float  # cores this job may use
    batch_wall_s: float  # one batch made by one worker: fetch, prepare, collate
    batch_cpu_s: float  # CPU seconds that batch costs in the worker
    step_wall_s: float  # the training step, per batch
    step_cpu_s: float  # CPU seconds the training step burns per batch
    batch_bytes: float = 0.0  # bytes a worker hands to the trainer per batch
    step_intra_cpu_s: float = 0.0  # CPU seconds per batch torch's intra-op threads add to the step
    handoff_s_per_byte: float = 0.0  # the measured cost of that hand-off on the trainer, per byte
    other_cores_busy: float = 0.0  # cores other processes keep busy meanwhile
    read_bytes_per_batch: float = 0.0  # bytes read from storage per batch
    disk_bytes_per_s: float | None = None  # what the storage delivers
    disk_in_use_bytes_per_s: float = 0.0  # what other processes already read from it

    @property
    def handoff_s(self) -> float:
        return self.batch_bytes * self.handoff_s_per_byte


@dataclass(frozen=True)
class Cap:
    name: str  # workers | trainer | handoff | threads | cores | disk
    batches_per_s: float
    why: str  # the cap in words: "the 2 cores (the training step uses 0.6 of one)"


def _per_s(seconds: float) -> float:
    return 1.0 / seconds if seconds > 0 else math.inf


def caps(p: Pipeline, workers: int) -> list[Cap]:
    """Every cap on the batch rate with ``workers`` workers, tightest first."""
    if workers == 0:
        turns = p.batch_wall_s + p.step_wall_s
        return [Cap("trainer", _per_s(turns), "loading and the training step taking turns on one thread")]
    found = [Cap("workers", workers * _per_s(p.batch_wall_s), f"{workers} worker(s) making one batch at a time")]
    trainer_s = p.step_wall_s + p.handoff_s
    if oversubscribed(p, workers):
        serial_s = p.step_cpu_s + p.step_intra_cpu_s + p.handoff_s
        why = (
            f"the training step's own threads sharing the {p.cores:g} cores with {workers} worker(s) "
            f"(the step then runs as on one core: {serial_s * 1e3:.1f} ms a batch)"
        )
        found.append(Cap("threads", _per_s(max(serial_s, trainer_s)), why))
    elif p.handoff_s > 0 and p.handoff_s >= HANDOFF_NAMED_SHARE * trainer_s:
        why = (
            f"handing {human_bytes(p.batch_bytes)} batches to the trainer "
            f"({p.handoff_s * 1e3:.1f} ms each, on top of a {p.step_wall_s * 1e3:.1f} ms step)"
        )
        found.append(Cap("handoff", _per_s(trainer_s), why))
    else:
        found.append(Cap("trainer", _per_s(trainer_s), f"the training step itself ({trainer_s * 1e3:.1f} ms a batch)"))
    cpu = p.batch_cpu_s + p.step_cpu_s + p.step_intra_cpu_s + p.handoff_s
    free = max(cores_for_job(p.cores, p.other_cores_busy, workers + 1), MIN_FREE_CORES)
    rate = free * _per_s(cpu)
    found.append(Cap("cores", rate, _cores_why(p, rate)))
    if p.disk_bytes_per_s and p.read_bytes_per_batch > 0:
        left = max(p.disk_bytes_per_s - p.disk_in_use_bytes_per_s, 0.0)
        found.append(Cap("disk", left / p.read_bytes_per_batch, _disk_why(p)))
    return sorted(found, key=lambda c: c.batches_per_s)


def intra_op_cores(p: Pipeline) -> float:
    """Cores torch's intra-op threads keep busy while the step runs (beyond the training thread)."""
    return p.step_intra_cpu_s / p.step_wall_s if p.step_wall_s > 0 else 0.0


def oversubscribed(p: Pipeline, workers: int) -> bool:
    """The step's intra-op threads, the training thread and ``workers`` busy workers need more
    cores than the job has beside other processes."""
    intra = intra_op_cores(p)
    if intra < MIN_INTRA_OP_CORES or p.step_intra_cpu_s < MIN_INTRA_OP_SHARE * (p.step_wall_s + p.batch_wall_s):
        return False
    return workers + 1 + intra > p.cores - p.other_cores_busy


def cores_for_job(cores: float, others: float, threads: int) -> float:
    """The cores ``threads`` busy threads of this job (workers and the trainer) get beside other
    processes keeping ``others`` cores busy: what is left while the host has room, and once it is
    crowded a fair share per runnable thread, as the Linux scheduler gives — so workers added on a
    busy host still win CPU from the neighbours, and a neighbour's burst never predicts a standstill."""
    if threads + others <= cores:
        return cores - others
    return cores * threads / (threads + others)


def _cores_why(p: Pipeline, rate: float) -> str:
    step_cores = p.step_cpu_s * rate if math.isfinite(rate) else 0.0
    parts = [f"the training step uses {step_cores:.1f} of one"]
    if p.other_cores_busy >= 0.1:
        parts.append(f"other processes {p.other_cores_busy:.1f}")
    return f"the {p.cores:g} cores ({', '.join(parts)})"


def _disk_why(p: Pipeline) -> str:
    rate = f"the disk at {(p.disk_bytes_per_s or 0) / 1e6:.0f} MB/s"
    if p.disk_in_use_bytes_per_s > 0:
        rate += f" ({p.disk_in_use_bytes_per_s / 1e6:.0f} MB/s of it taken by other reads)"
    return rate


def batch_rate(p: Pipeline, workers: int) -> float:
    """Predicted batches per second with ``workers`` workers."""
    return caps(p, workers)[0].batches_per_s


def knee(p: Pipeline, ladder: list[int], reach: float = 0.95) -> int:
    """The fewest workers on ``ladder`` predicted to reach ``reach`` of the best predicted rate."""
    best = max(batch_rate(p, w) for w in ladder)
    return next(w for w in ladder if batch_rate(p, w) >= reach * best)


def explain(p: Pipeline, ladder: list[int]) -> str | None:
    """``past 4 workers the rate is capped by the 2 cores (...)``; None when workers never stop helping."""
    at, most = knee(p, ladder), max(ladder)
    cap = caps(p, most)[0]  # what holds the rate down however many workers are added
    if most == 0 or cap.name == "workers":
        return None
    if at == 0:  # loading on the training thread beats every worker count: say why workers lose
        return f"more workers do not help: with them the rate is capped by {cap.why}"
    return f"past {at} worker{'s' if at != 1 else ''} the rate is capped by {cap.why}"
