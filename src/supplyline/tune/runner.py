"""Glue: from a target, a consumer and a budget to a SearchResult, with the checks that make a
too-small budget or a broken dataset one clear line instead of a half-run."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from supplyline.errors import UserError
from supplyline.tune.consumer import Consumer
from supplyline.tune.handoff import handoff_s_per_byte
from supplyline.tune.measure import DatasetBroken, Measurement, measure_config
from supplyline.tune.model import ThroughputModel, probe
from supplyline.tune.search import ProgressFn, Search, SearchPlan, SearchResult
from supplyline.tune.space import (
    PREFETCH_LADDER,
    LoaderConfig,
    default_start_method,
    usable_cores,
    worker_ladder,
)
from supplyline.tune.target import TuneTarget, item_deadline
from supplyline.units import human_duration

# About how many configurations a search measures per batch size, plus the shared stages; the
# window per configuration is the budget spread over these.
PLANNED_PER_BATCH_SIZE = 5
PLANNED_SHARED = 4
MIN_STEADY_BATCHES = 4


@dataclass
class TuneOptions:
    batch_sizes: list[int]
    budget_s: float
    max_memory_bytes: int | None = None
    max_workers: int | None = None
    cuda: bool = False
    prefetch_ladder: tuple[int, ...] = PREFETCH_LADDER
    window_s: float | None = None  # steady seconds per configuration; None: from the budget


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # a broken CUDA install is the same as none for tuning
        return False


def alternative_start_methods() -> list[str]:
    """Start methods worth trying besides the default. Only fork starts workers faster than the
    default does, and only on Linux is fork safe and available; elsewhere (or where fork is
    already the default) there is nothing to gain, so nothing is tried."""
    return ["fork"] if sys.platform.startswith("linux") and default_start_method() != "fork" else []


def window_for(budget_s: float, batch_sizes: int) -> float:
    """Seconds of steady state per configuration: the budget spread over the planned runs (each
    also pays start-up, warm-up and a restart, hence the 1.5)."""
    planned = PLANNED_PER_BATCH_SIZE * batch_sizes + PLANNED_SHARED
    return budget_s / (planned * 1.5)


def minimum_window(model: ThroughputModel) -> float:
    # Enough batches for a steady rate even with one worker and the consumer taking turns.
    per_batch = model.batch_wall_s + model.consumer_wall_s
    return max(0.2, (MIN_STEADY_BATCHES + 2) * per_batch)


def tune(
    target: TuneTarget,
    consumer: Consumer,
    options: TuneOptions,
    on_progress: ProgressFn | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> SearchResult:
    # An item that takes the whole budget cannot be tuned: it fails, named, instead of hanging tune.
    with item_deadline(options.budget_s):
        return _tune(target, consumer, options, on_progress, clock)


def _tune(
    target: TuneTarget,
    consumer: Consumer,
    options: TuneOptions,
    on_progress: ProgressFn | None,
    clock: Callable[[], float],
) -> SearchResult:
    cores = usable_cores()
    started = clock()
    models: dict[int, ThroughputModel] = {}
    handoff = handoff_s_per_byte()  # a host fact: once per run, whatever the batch size

    def model_for(batch_size: int) -> ThroughputModel:
        if batch_size not in models:
            models[batch_size] = probe(target, consumer, batch_size, cores, handoff_s_per_byte=handoff)
        return models[batch_size]

    first = model_for(options.batch_sizes[0])
    left = options.budget_s - (clock() - started)
    need_window = minimum_window(first)
    # Three configurations at least: the baseline, the model's knee, one neighbour.
    need = (clock() - started) + 3 * (need_window * 1.5 + 0.3)
    if options.budget_s < need:
        raise UserError(
            f"--budget {options.budget_s:g}s is too small to measure anything here: one batch "
            f"takes {human_duration(first.batch_wall_s + first.consumer_wall_s)}, so three "
            f"configurations need about {need:.0f}s; give --budget {max(need * 2, 10):.0f} or more"
        )
    window = max(need_window, options.window_s or window_for(left, len(options.batch_sizes)))
    ladder = worker_ladder(cores, options.max_workers)
    timeout = max(60.0, 50 * (first.batch_wall_s + first.consumer_wall_s))

    def measure(config: LoaderConfig, window_s: float) -> Measurement:
        return measure_config(
            target,
            config,
            consumer,
            window_s,
            options.max_memory_bytes,
            timeout_s=timeout,
            min_steady_batches=MIN_STEADY_BATCHES,
        )

    plan = SearchPlan(
        batch_sizes=options.batch_sizes,
        ladder=ladder,
        budget_s=options.budget_s - (clock() - started),
        window_s=window,
        prefetch_ladder=options.prefetch_ladder,
        try_pin_memory=options.cuda,
        start_methods=alternative_start_methods(),
    )
    try:
        return Search(plan, measure, model_for, target.baseline, clock=clock, on_progress=on_progress).run()
    except DatasetBroken as exc:
        raise UserError(f"{target.spec}: {exc}") from exc
