"""Measure one DataLoader configuration for real: start-up, steady-state rate, restart, memory."""

from __future__ import annotations

import gc
import itertools
import math
import statistics
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import psutil

from supplyline.tune.consumer import Consumer
from supplyline.tune.memory import WorkerMemoryWatch
from supplyline.tune.space import LoaderConfig
from supplyline.tune.target import TuneTarget, item_error_in
from supplyline.units import human_bytes


class DatasetBroken(Exception):
    """The dataset itself fails (an item raises): every configuration would fail, so stop."""


@dataclass
class Measurement:
    """What one configuration did. Rates are samples per second, times are seconds, memory bytes.

    ``samples_per_s`` is the rate over the measuring window, warm-up excluded (epochs that ended
    inside the window have their restarts in it); ``spread`` compares three equal time slices. ``epoch_samples_per_s`` is what training
    sees over whole epochs, the restart at each epoch's start included. Repeats take medians.
    """

    config: LoaderConfig
    status: str = "ok"  # ok | failed | stopped
    reason: str = ""
    samples_per_s: float = 0.0
    epoch_samples_per_s: float = 0.0
    runs: list[float] = field(default_factory=list)  # samples_per_s of each run (repeats)
    epoch_runs: list[float] = field(default_factory=list)  # epoch_samples_per_s of each run
    spread: float = 0.0  # (max - min) / median of the slice rates: the noise
    steady_batches: int = 0
    main_cpu_per_batch_s: float = 0.0  # main thread's CPU per batch (receiving + the consumer)
    window_samples: int = 0
    window_s: float = 0.0
    restarts_in_window: int = 0  # epochs that ended inside the window (small datasets)
    time_to_first_batch_s: float | None = None
    restart_s: float | None = None  # to the first batch of a new epoch, this config's way
    workers_rss_bytes: int = 0  # peak total RSS of the workers (shared pages counted in each)
    workers_pss_bytes: int = 0  # peak total PSS of the workers (shared pages split)
    worker_rss_max_bytes: int = 0  # the largest single worker
    main_rss_bytes: int = 0
    measured_s: float = 0.0  # wall time spent measuring
    epoch_samples: int | None = None  # items per epoch
    derived_from: str | None = None  # set when computed from another run, not run itself

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def epoch_rate_with(self, restart_s: float | None) -> float:
        """The epoch rate if each new epoch cost ``restart_s`` (another way of restarting)."""
        if self.restarts_in_window and self.window_s > 0 and restart_s is not None and self.restart_s is not None:
            extra = self.restarts_in_window * (restart_s - self.restart_s)
            return self.window_samples / max(self.window_s + extra, 1e-9)
        if self.restarts_in_window:
            return self.samples_per_s
        return epoch_rate(self.samples_per_s, restart_s, self.epoch_samples)

    def finish(self) -> None:
        self.epoch_samples_per_s = self.epoch_rate_with(self.restart_s)
        self.runs, self.epoch_runs = [self.samples_per_s], [self.epoch_samples_per_s]

    def add_run(self, other: Measurement) -> None:
        """Fold a repeat of the same configuration in: rates become the medians of the runs."""
        if not other.ok:
            return
        self.runs.append(other.samples_per_s)
        self.epoch_runs.append(other.epoch_samples_per_s)
        self.samples_per_s = statistics.median(self.runs)
        self.epoch_samples_per_s = statistics.median(self.epoch_runs)
        self.measured_s += other.measured_s

    def score(self) -> float:
        """What the tuner ranks by: samples/s over whole epochs, restarts included."""
        return self.epoch_samples_per_s if self.ok else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config.to_json(),
            "label": self.config.label(),
            "status": self.status,
            "reason": self.reason,
            "samples_per_s": round(self.samples_per_s, 2),
            "epoch_samples_per_s": round(self.epoch_samples_per_s, 2),
            "runs_samples_per_s": [round(r, 2) for r in self.runs],
            "spread": round(self.spread, 4),
            "steady_batches": self.steady_batches,
            "main_cpu_per_batch_s": round(self.main_cpu_per_batch_s, 6),
            "restarts_in_window": self.restarts_in_window,
            "time_to_first_batch_s": _round(self.time_to_first_batch_s),
            "restart_s": _round(self.restart_s),
            "workers_rss_bytes": self.workers_rss_bytes,
            "workers_pss_bytes": self.workers_pss_bytes,
            "worker_rss_max_bytes": self.worker_rss_max_bytes,
            "main_rss_bytes": self.main_rss_bytes,
            "total_memory_bytes": self.workers_pss_bytes + self.main_rss_bytes,
            "measured_s": round(self.measured_s, 3),
            "derived_from": self.derived_from,
        }


def _round(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else round(x, 5)


def epoch_rate(rate: float, restart_s: float | None, epoch_samples: int | None) -> float:
    """Samples/s over one epoch of ``epoch_samples`` that first pays ``restart_s``."""
    if rate <= 0 or not epoch_samples or not restart_s or math.isnan(restart_s):
        return rate
    return epoch_samples / (epoch_samples / rate + restart_s)


def _batch_len(batch: Any, default: int) -> int:
    """Samples in a batch: the leading size of its first tensor (a last batch may be short)."""
    import torch

    stack = [batch]
    while stack:
        item = stack.pop(0)
        if isinstance(item, torch.Tensor):
            return int(item.shape[0]) if item.dim() else default
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return default


def _segment_rates(marks: list[tuple[float, int]], segments: int = 3) -> list[float]:
    """Rates over equal time slices of the steady window, from (time, cumulative samples) marks.

    Each slice is charged its whole duration: batches arrive in bursts (several workers finishing
    together), and timing a slice from its first to its last batch would flatter it.
    """
    if len(marks) < 2 or marks[-1][0] <= marks[0][0]:
        return []
    t0, total_t = marks[0][0], marks[-1][0] - marks[0][0]
    edges = [t0 + total_t * k / segments for k in range(segments + 1)]

    def done_by(t: float) -> int:
        return max((n for when, n in marks if when <= t), default=0)

    return [(done_by(hi) - done_by(lo)) / (hi - lo) for lo, hi in itertools.pairwise(edges)]


def measure_config(
    target: TuneTarget,
    config: LoaderConfig,
    consumer: Consumer,
    window_s: float,
    max_memory_bytes: int | None = None,
    timeout_s: float = 120.0,
    min_steady_batches: int = 4,
) -> Measurement:
    """Run ``config`` for about ``window_s`` seconds of steady state and measure it.

    Warm-up (the worker start and the prefetch burst) is excluded: the steady window opens after
    ``max(2, num_workers)`` batches and 15% of the window. Epoch ends inside the window restart
    the iterator on the window's clock, as training would. A worker crash, a hang past
    ``timeout_s`` or memory past ``max_memory_bytes`` give a failed or stopped Measurement; an item
    that raises raises DatasetBroken.
    """
    config = config.normalized()
    result = Measurement(config=config, epoch_samples=target.length)
    watch = WorkerMemoryWatch(max_memory_bytes)
    loader = target.make_loader(config, timeout_s=timeout_s)
    iterator: Any = None
    started = time.perf_counter()
    try:
        # Workers past the cores are tried on purpose (I/O-bound items): PyTorch's warning is noise here.
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        iterator = iter(loader)
        watch.attach(iterator)
        batch = next(iterator)
        result.time_to_first_batch_s = time.perf_counter() - started
        consumer(batch)
        window = _run_window(
            loader,
            iterator,
            consumer,
            config,
            window_s,
            min_steady_batches,
            watch,
            per_batch_guess_s=result.time_to_first_batch_s,
        )
        iterator, marks, restarts = window.iterator, window.marks, window.restarts
        rates = _segment_rates(marks)
        if not rates or marks[-1][0] <= 0:
            raise RuntimeError("too few batches to measure a steady rate")
        rates.sort()
        result.window_s, result.window_samples = marks[-1]
        result.steady_batches = len(marks) - 1
        result.main_cpu_per_batch_s = window.main_cpu_s / max(result.steady_batches, 1)
        result.restarts_in_window = len(restarts)
        # The whole window's rate: unbiased however batches bunch up. The slices only say how
        # steady it was; repeats (by the search) take medians.
        result.samples_per_s = result.window_samples / result.window_s
        median = rates[len(rates) // 2]
        result.spread = (rates[-1] - rates[0]) / median if median else 0.0
        if not restarts:
            period = result.window_s / max(result.steady_batches, 1)
            restarts.append(_restart_cost(loader, iterator, config, result.time_to_first_batch_s, period, watch))
        result.restart_s = sorted(restarts)[len(restarts) // 2]
        result.finish()
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        found = item_error_in(exc)
        if found:
            raise DatasetBroken(found) from exc
        if watch.exceeded_bytes is not None:
            result.status = "stopped"
            result.reason = (
                f"workers' memory (PSS) {human_bytes(watch.exceeded_bytes)} exceeded --max-memory "
                f"{human_bytes(max_memory_bytes or 0)}"
            )
        else:
            result.status = "failed"
            text = str(exc).strip().splitlines()
            result.reason = f"{type(exc).__name__}: {text[0] if text else ''}"
    finally:
        # A worker the memory watch killed makes torch's SIGCHLD handler raise in this thread at
        # whatever line runs next, here too: close again, once per worker, and say why it stopped.
        for _ in range(config.num_workers + 1):
            try:
                _close(result, watch, iterator, loader)
                break
            except RuntimeError as exc:
                if watch.exceeded_bytes is None or "killed by signal" not in str(exc):
                    raise
                result.status = "stopped"
                result.reason = (
                    f"workers' memory (PSS) {human_bytes(watch.exceeded_bytes)} exceeded --max-memory "
                    f"{human_bytes(max_memory_bytes or 0)}"
                )
        result.measured_s = time.perf_counter() - started
    return result


def _close(result: Measurement, watch: Any, iterator: Any, loader: Any) -> None:
    """Stop the memory watch, keep its peaks, shut the workers down."""
    watch.sample()
    watch.stop()
    result.workers_rss_bytes = watch.peak_rss_total_bytes
    result.workers_pss_bytes = watch.peak_pss_total_bytes
    result.worker_rss_max_bytes = watch.peak_worker_rss_bytes
    result.main_rss_bytes = psutil.Process().memory_info().rss
    _shutdown(iterator, loader)


@dataclass
class _Window:
    iterator: Any  # the live iterator (a new one after an epoch end)
    marks: list[tuple[float, int]]  # (steady seconds, cumulative samples) after each batch
    restarts: list[float]  # seconds to the first batch of each new epoch
    main_cpu_s: float  # main thread CPU seconds over the steady window


def _run_window(
    loader: Any,
    iterator: Any,
    consumer: Consumer,
    config: LoaderConfig,
    window_s: float,
    min_steady_batches: int,
    watch: WorkerMemoryWatch,
    per_batch_guess_s: float,
) -> _Window:
    """Consume batches through warm-up and the steady window; epoch ends restart the iterator (on
    the clock: workers keep filling their queues meanwhile, so stopping it would flatter them)."""
    warmup_batches = max(2, config.num_workers)
    first = time.perf_counter()
    # A slow configuration (or a busy machine) still gets its minimum of batches; a hung one still ends.
    hard_stop = first + max(4 * window_s, 2.0, (warmup_batches + min_steady_batches + 2) * per_batch_guess_s)
    batches = 0
    steady_at: float | None = None
    cpu_at = 0.0
    marks: list[tuple[float, int]] = []
    samples = 0
    restarts: list[float] = []
    while True:
        now = time.perf_counter()
        if steady_at is None and batches >= warmup_batches and now - first >= 0.15 * window_s:
            steady_at, cpu_at = now, time.thread_time()
            marks.append((0.0, 0))
        if steady_at is not None:
            clock = now - steady_at
            if (clock >= window_s and len(marks) > min_steady_batches) or now > hard_stop:
                break
        elif now > hard_stop:
            break
        try:
            batch = next(iterator)
        except StopIteration:
            r0 = time.perf_counter()
            iterator = iter(loader)
            watch.attach(iterator)
            batch = next(iterator)
            cost = time.perf_counter() - r0
            if steady_at is not None:
                restarts.append(cost)
        consumer(batch)
        batches += 1
        if steady_at is not None:
            samples += _batch_len(batch, config.batch_size)
            marks.append((time.perf_counter() - steady_at, samples))
    return _Window(iterator, marks, restarts, time.thread_time() - cpu_at if steady_at is not None else 0.0)


def _restart_cost(
    loader: Any,
    iterator: Any,
    config: LoaderConfig,
    first_batch_s: float | None,
    batch_period_s: float,
    watch: WorkerMemoryWatch,
) -> float:
    """Time to the first batch of a new epoch. Persistent workers are reset and timed for real;
    otherwise a new epoch starts workers afresh, which is what the first batch already timed.

    A reset mid-epoch first drains the batches still in flight, which an epoch that ran to its end
    would not have: their share (in flight x the steady batch period) is taken off, and a reset is
    never dearer than the cold start it avoids.
    """
    cold = first_batch_s if first_batch_s is not None else math.nan
    if config.num_workers == 0 or not config.persistent_workers:
        return cold
    in_flight = int(getattr(iterator, "_tasks_outstanding", 0) or 0)
    r0 = time.perf_counter()
    fresh = iter(loader)  # resets the same workers
    watch.attach(fresh)
    next(fresh)
    reset = time.perf_counter() - r0
    return min(max(reset - in_flight * batch_period_s, batch_period_s), cold)


def _shutdown(iterator: Any, loader: Any) -> None:
    """Stop workers now, not when the garbage collector gets to them: the next configuration must
    not share the cores with this one's leftovers."""
    for it in (iterator, getattr(loader, "_iterator", None)):
        stop = getattr(it, "_shutdown_workers", None)
        if stop:
            try:
                stop()
            except Exception:
                pass
    gc.collect()
