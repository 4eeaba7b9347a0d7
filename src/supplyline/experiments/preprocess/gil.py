"""GIL check: the same per-sample work on N threads and on N processes, as throughput vs one thread.

Work that holds the GIL gains nothing from threads (×~1) but scales with processes; work in
NumPy/native code that releases the GIL scales either way. Runs alternate (single, threads,
processes, twice) and each keeps its best, because other programs on the machine add noise.
"""
from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

from supplyline.experiments.preprocess.report import GilReport

# Process scaling must beat thread scaling by this factor to call the work GIL-bound.
GIL_RATIO = 1.3


def _work(dataset: Any, indices: list[int], count: int) -> None:
    for k in range(count):
        dataset[indices[k % len(indices)]]


def _single(dataset: Any, indices: list[int], count: int) -> float:
    start = time.perf_counter()
    _work(dataset, indices, count)
    return time.perf_counter() - start


def _threads(dataset: Any, indices: list[int], count: int, n: int) -> float:
    barrier = threading.Barrier(n + 1)

    def body() -> None:
        barrier.wait()
        _work(dataset, indices, count)

    threads = [threading.Thread(target=body, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def _process_body(dataset: Any, indices: list[int], count: int, barrier: Any, results: Any) -> None:
    barrier.wait()
    start = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes of one machine
    _work(dataset, indices, count)
    results.put((start, time.perf_counter()))


def _processes(dataset: Any, indices: list[int], count: int, n: int, ctx: Any) -> float:
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    procs = [ctx.Process(target=_process_body, args=(dataset, indices, count, barrier, results), daemon=True)
             for _ in range(n)]
    for p in procs:
        p.start()
    spans = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return max(end for _, end in spans) - min(start for start, _ in spans)


def check_gil(dataset: Any, indices: list[int], seconds_per_item: float, parallelism: int,
              start_method: str | None, processes_allowed: bool, target_s: float = 0.25,
              rounds: int = 2) -> GilReport:
    """Throughput scaling of ``dataset[i]`` on ``parallelism`` threads and processes vs one thread."""
    count = int(min(max(target_s / max(seconds_per_item, 1e-6), 3), 5000))
    ctx = multiprocessing.get_context(start_method)
    _work(dataset, indices, min(count, 3))  # warm caches so the first timed run is not penalized
    single = threads = processes = float("inf")
    for _ in range(rounds):
        single = min(single, _single(dataset, indices, count))
        threads = min(threads, _threads(dataset, indices, count, parallelism))
        if processes_allowed:
            processes = min(processes, _processes(dataset, indices, count, parallelism, ctx))
    thread_scaling = parallelism * single / threads
    process_scaling = parallelism * single / processes if processes_allowed else None
    return GilReport(parallelism=parallelism, single_items_per_s=count / single, thread_scaling=thread_scaling,
                     process_scaling=process_scaling, holds_gil=_holds_gil(thread_scaling, process_scaling),
                     verdict=verdict(thread_scaling, process_scaling, parallelism))


def _holds_gil(thread_scaling: float, process_scaling: float | None) -> bool:
    return process_scaling is not None and process_scaling >= GIL_RATIO * thread_scaling


def verdict(thread_scaling: float, process_scaling: float | None, n: int) -> str:
    head = f"threads ×{thread_scaling:.2f}"
    if process_scaling is None:
        return head + f" on {n} threads (processes not measured)"
    head += f", processes ×{process_scaling:.2f} on {n} {'cores' if n > 1 else 'core'}"
    if _holds_gil(thread_scaling, process_scaling):
        return head + (": this work holds the GIL; keep it in worker processes or move it into "
                       "vectorized/native code")
    if process_scaling < 1.15:
        return head + ": neither scaled — the machine is busy or the work is bound by something shared (disk, memory)"
    return head + ": threads scale like processes — this work releases the GIL"
