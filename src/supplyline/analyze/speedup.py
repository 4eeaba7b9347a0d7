"""The speed-up model: how much faster a step gets when one link of the supply line is fixed.

Removing a phase's time entirely gives ``1 / (1 - share)`` (logging, checkpoints, transfers).
Feeding the step faster is bounded twice: by the consumer's own rate (the compute-only what-if
replay, or the rest of the step) and by the producer's rate with more workers, where CPU-bound
workers share the cores with the training step itself. docs/how-it-works.md explains the model.
"""

from __future__ import annotations

from dataclasses import dataclass

# A phase can never be credited with more than this speed-up from its removal (share capped at 95%).
MAX_REMOVAL_SPEEDUP = 20.0


def removal_speedup(share: float) -> float:
    """Speed-up from removing a phase that takes ``share`` of step time."""
    return 1.0 / max(1.0 - share, 1.0 / MAX_REMOVAL_SPEEDUP)


@dataclass(frozen=True)
class InputModel:
    """What the input speed-up is computed from; every time in seconds."""

    step_s: float  # observed median step
    wait_share: float  # share of step time spent waiting for data
    batches_per_step: float
    cores: int
    # From the what-if phases, when they ran: the step with the batch ready, and the loader's rate
    # with no consumer.
    compute_only_step_s: float | None = None
    loader_only_batches_per_s: float | None = None


def input_speedup(m: InputModel, workers_before: int, workers_after: int, scales_past_cores: bool) -> float:
    """Speed-up from feeding the step faster, bounded by the consumer's own rate.

    The producer rate scales with the worker count (per-process rate measured by the loader-only
    drain); CPU-bound preparation stops scaling at the core count, latency-bound reads do not.
    """
    share = m.wait_share
    if not m.step_s or not m.batches_per_step:
        return removal_speedup(share)
    observed = 1.0 / m.step_s
    if m.compute_only_step_s and m.loader_only_batches_per_s:
        consumer_step = m.compute_only_step_s
        per_process = m.loader_only_batches_per_s / m.batches_per_step / max(workers_before, 1)
    elif workers_before == 0 and 0 < share < 1:
        # No what-if, but with num_workers=0 the wait *is* one process producing a step's batches.
        wait = m.step_s * share
        consumer_step, per_process = m.step_s - wait, 1.0 / wait
    else:
        return removal_speedup(share)
    consumer = 1.0 / consumer_step
    if scales_past_cores:
        producer = per_process * max(workers_after, 1)
    else:
        # CPU-bound workers share the cores with the training step itself, which at rate r keeps
        # r * compute_step of a core busy: r = p * (cores - r * c)  =>  r = p * cores / (1 + p * c).
        cores = min(workers_after, m.cores)
        producer = per_process * cores / (1.0 + per_process * consumer_step)
    # Never more than removing the whole wait: the observed rest of the step is the consumer's real cost.
    return max(1.0, min(min(consumer, producer) / observed, removal_speedup(share)))


# Copying a state into memory the previous copy already touched, as the background saver does: about
# 8 GB/s measured on our 2-core machine (32 MB in 4 ms; fresh pages: 1 GB/s); half that leaves room
# for a busier host. A GPU state copies over PCIe at a similar rate to pageable memory.
SNAPSHOT_BYTES_PER_S = 4e9


def background_save_speedup(steps_between: float, rest_s: float, save_s: float, snapshot_s: float) -> float:
    """Speed-up from saving in the background: the state is copied on the training thread
    (``snapshot_s``), then written on another while the next ``steps_between`` steps run (``rest_s``
    each, the step without its save); the next save waits for that write. A write that takes longer
    than the steps between saves cannot hide, and the copy makes it slower than saving in place."""
    train = steps_between * rest_s
    in_place = train + save_s
    background = train + snapshot_s + max(0.0, save_s - train)
    return in_place / background if background > 0 else 1.0
