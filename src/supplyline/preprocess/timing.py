"""Time ``__getitem__`` per sample and the collate function per batch, in the main process.

Results fill a caller-owned object as they arrive, so Ctrl-C part-way keeps every sample measured.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from supplyline.preprocess import schedclock
from supplyline.preprocess.chain import InstalledChain, same_value
from supplyline.preprocess.report import Distribution, Location, SampleError

Progress = Callable[[int], None]


@dataclass
class SampleTimes:
    """Per-sample results of the timing pass, filled in place."""

    indices: list[int] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    own_ms: list[float] = field(default_factory=list)  # wall minus time waiting for a CPU (busy machine)
    cpu_ms: list[float] = field(default_factory=list)
    errors: list[SampleError] = field(default_factory=list)
    kept: list[Any] = field(default_factory=list)  # loaded samples, for the collate and transfer runs

    def distribution(self) -> Distribution:
        return Distribution.of(self.wall_ms, self.indices)

    def own_distribution(self) -> Distribution:
        return Distribution.of(self.own_ms, self.indices)

    def cpu_share(self) -> float | None:
        total = sum(self.own_ms)
        return min(sum(self.cpu_ms) / total, 1.0) if total > 0 else None

    def cpu_wait_share(self) -> float:
        total = sum(self.wall_ms)
        return 1 - sum(self.own_ms) / total if total > 0 else 0.0


def _short_traceback(exc: BaseException) -> str:
    # Drop supplyline's own frame at the top: the user wants their frames only.
    frames = traceback.extract_tb(exc.__traceback__)[1:]
    return "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(exc), exc))


def _raise_site(exc: BaseException) -> Location | None:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    last = frames[-1]
    return Location(file=last.filename, line=last.lineno or 0, function=last.name)


def time_samples(
    dataset: Any,
    indices: list[int],
    out: SampleTimes,
    keep: int,
    chain: InstalledChain | None = None,
    progress: Progress | None = None,
) -> None:
    """Call ``dataset[i]`` for each index, recording wall and thread-CPU time; errors are kept, not raised."""
    recorder = chain.recorder if chain else None
    for index in indices:
        if recorder:
            recorder.begin_sample()
        cpu0 = time.thread_time()
        queued = schedclock.queue_wait_ns()
        start = time.perf_counter()
        try:
            sample = dataset[index]
        except Exception as exc:
            out.errors.append(
                SampleError(
                    index=index,
                    error=f"{type(exc).__name__}: {exc}",
                    traceback=_short_traceback(exc),
                    location=_raise_site(exc),
                )
            )
        else:
            elapsed_ms = (time.perf_counter() - start) * 1e3
            out.cpu_ms.append((time.thread_time() - cpu0) * 1e3)
            out.wall_ms.append(elapsed_ms)
            out.own_ms.append(max(elapsed_ms - (schedclock.queue_wait_ns() - queued) / 1e6, 0.0))
            out.indices.append(index)
            if recorder:
                recorder.commit_sample()
            if len(out.kept) < keep:
                out.kept.append(sample)
        if progress:
            progress(1)


def check_determinism(dataset: Any, indices: list[int], chain: InstalledChain | None) -> bool | None:
    """Load each index twice: True when every pair is equal (the work could be cached once).

    With a chain installed, each stage also runs twice on a copy of its input, so a deterministic
    prefix of the chain is found even when a later stage is random.
    """
    if not indices:
        return None
    if chain:
        chain.recorder.checking = True
    try:
        results = []
        for index in indices:
            try:
                results.append(same_value(dataset[index], dataset[index]))
            except Exception:
                return None
        return all(results)
    finally:
        if chain:
            chain.recorder.checking = False


def time_collate(
    samples: list[Any], batch_size: int, collate_fn: Callable[[list[Any]], Any], progress: Progress | None = None
) -> tuple[Distribution, Any]:
    """Time ``collate_fn`` over consecutive batches of loaded samples; returns the first batch too."""
    times: list[float] = []
    first: Any = None
    for start in range(0, max(len(samples) - batch_size + 1, 1), batch_size):
        chunk = samples[start : start + batch_size]
        t0 = time.perf_counter()
        batch = collate_fn(chunk)
        times.append((time.perf_counter() - t0) * 1e3)
        if first is None:
            first = batch
        if progress:
            progress(1)
    return Distribution.of(times), first
