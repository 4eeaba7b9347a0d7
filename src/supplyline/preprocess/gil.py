"""GIL check: the same per-sample work on N threads and on N processes, as throughput vs one thread.

Work that holds the GIL gains nothing from threads (×~1) but scales with processes; work in
NumPy/native code that releases the GIL scales either way. Runs alternate (single, threads,
processes, at least twice) and each keeps its best, because other programs on the machine add noise;
while processes show no scaling at all (no free core), more rounds are run.

When the machine is so busy that even processes do not scale, throughput cannot tell the two
apart. Linux's per-thread schedstat can: it splits a thread's time into running and waiting for a
CPU; what remains is time blocked — for threads doing the same CPU work, that is waiting for the
GIL (minus what one thread alone spends blocked, e.g. on I/O). It is taken as a share of the time
the thread was *not* queued for a CPU, because on a loaded machine a GIL waiter that wakes on its
5 ms timeout spends long stretches queued too (measured here: 2 GIL-bound threads on a machine
giving us a third of a core: blocked 12% of wall, but 41% of the unqueued time; NumPy sorts: 0-22%,
the high end when the machine is overloaded — hence the least-blocked round is used).
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

from supplyline.preprocess import schedclock
from supplyline.preprocess.report import GilReport

# Without schedstat: process scaling must beat thread scaling by this factor to call the work GIL-bound.
GIL_RATIO = 1.3
# Below this process scaling the machine gave us no second core: threads vs processes says nothing.
INCONCLUSIVE_BELOW = 1.3
# Threads blocked this much longer than one thread alone means they queue for the GIL (2 GIL-bound
# threads: ~0.5 ideally, 0.34-0.46 measured here under heavy load; NumPy sorts: 0.00-0.05).
GIL_WAIT_SHARE = 0.25


def _work(dataset: Any, indices: list[int], count: int) -> None:
    for k in range(count):
        dataset[indices[k % len(indices)]]


def _timed_work(dataset: Any, indices: list[int], count: int, blocked: list[float]) -> None:
    """Do the work; append the share of its unqueued time this thread spent blocked (not running)."""
    before, start = schedclock.thread_sched(), time.perf_counter_ns()
    _work(dataset, indices, count)
    after, wall = schedclock.thread_sched(), time.perf_counter_ns() - start
    if before and after and wall > 0:
        running = after[0] - before[0]
        unqueued = wall - (after[1] - before[1])
        if unqueued > 0:
            blocked.append(min(max(0.0, 1 - running / unqueued), 1.0))


def _single(dataset: Any, indices: list[int], count: int) -> tuple[float, float | None]:
    blocked: list[float] = []
    start = time.perf_counter()
    _timed_work(dataset, indices, count, blocked)
    return time.perf_counter() - start, blocked[0] if blocked else None


def _threads(dataset: Any, indices: list[int], count: int, n: int) -> tuple[float, float | None]:
    barrier = threading.Barrier(n + 1)
    blocked: list[float] = []

    def body() -> None:
        barrier.wait()
        _timed_work(dataset, indices, count, blocked)

    threads = [threading.Thread(target=body, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - start, sum(blocked) / len(blocked) if len(blocked) == n else None


def _process_body(dataset: Any, indices: list[int], count: int, barrier: Any, results: Any) -> None:
    barrier.wait()
    start = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes of one machine
    _work(dataset, indices, count)
    results.put((start, time.perf_counter()))


def _processes(dataset: Any, indices: list[int], count: int, n: int, ctx: Any) -> float:
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_process_body, args=(dataset, indices, count, barrier, results), daemon=True)
        for _ in range(n)
    ]
    for p in procs:
        p.start()
    spans = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return max(end for _, end in spans) - min(start for start, _ in spans)


def check_gil(
    dataset: Any,
    indices: list[int],
    seconds_per_item: float,
    parallelism: int,
    start_method: str | None,
    processes_allowed: bool,
    target_s: float = 0.15,
    min_rounds: int = 2,
    max_rounds: int = 3,
) -> GilReport:
    """Throughput scaling of ``dataset[i]`` on ``parallelism`` threads and processes vs one thread.

    Rounds go on past ``min_rounds`` while the answer is inconclusive (processes did not scale
    either: other programs held the cores), up to ``max_rounds``.
    """
    count = int(min(max(target_s / max(seconds_per_item, 1e-6), 3), 5000))
    ctx = multiprocessing.get_context(start_method)
    _work(dataset, indices, min(count, 3))  # warm caches so the first timed run is not penalized
    single = threads = processes = float("inf")
    single_blocked: list[float] = []
    threads_blocked: list[float] = []
    for done in range(1, max_rounds + 1):
        single, single_blocked = _best(single, single_blocked, _single(dataset, indices, count))
        threads, threads_blocked = _best(threads, threads_blocked, _threads(dataset, indices, count, parallelism))
        if processes_allowed:
            processes = min(processes, _processes(dataset, indices, count, parallelism, ctx))
        if done >= min_rounds and (not processes_allowed or parallelism * single / processes >= INCONCLUSIVE_BELOW):
            break
    thread_scaling = parallelism * single / threads
    process_scaling = parallelism * single / processes if processes_allowed else None
    # The least-blocked round: a holder of the GIL preempted by another program makes the others
    # block too, so load only ever adds blocked time; GIL-bound threads block in every round.
    gil_wait = max(0.0, min(threads_blocked) - min(single_blocked)) if threads_blocked and single_blocked else None
    holds = _holds_gil(thread_scaling, process_scaling, gil_wait)
    return GilReport(
        parallelism=parallelism,
        single_items_per_s=count / single,
        thread_scaling=thread_scaling,
        process_scaling=process_scaling,
        gil_wait_share=gil_wait,
        holds_gil=holds,
        verdict=verdict(thread_scaling, process_scaling, parallelism, gil_wait),
    )


def _best(best: float, blocked: list[float], run: tuple[float, float | None]) -> tuple[float, list[float]]:
    seconds, share = run
    if share is not None:
        blocked = [*blocked, share]
    return min(best, seconds), blocked


def _conclusive(process_scaling: float | None) -> bool:
    return process_scaling is not None and process_scaling >= INCONCLUSIVE_BELOW


def _holds_gil(thread_scaling: float, process_scaling: float | None, gil_wait: float | None) -> bool:
    """schedstat's GIL wait decides where Linux provides it (it does not depend on free cores);
    otherwise processes must out-scale threads in a run where processes scaled at all."""
    if gil_wait is not None:
        return gil_wait >= GIL_WAIT_SHARE
    return _conclusive(process_scaling) and process_scaling >= GIL_RATIO * thread_scaling  # type: ignore[operator]  # _conclusive: not None


def verdict(thread_scaling: float, process_scaling: float | None, n: int, gil_wait: float | None = None) -> str:
    head = f"threads ×{thread_scaling:.2f}"
    if process_scaling is not None:
        head += f", processes ×{process_scaling:.2f}"
    head += f" on {n} {'cores' if n > 1 else 'core'}"
    if process_scaling is not None and not _conclusive(process_scaling):
        head += " (processes did not scale either: no free core now)"
    if gil_wait is not None:
        head += f"; threads waited on the GIL {gil_wait:.0%} of the time they were not queued for a CPU"
    if _holds_gil(thread_scaling, process_scaling, gil_wait):
        return head + ": this work holds the GIL; keep it in worker processes or move it into vectorized/native code"
    if gil_wait is None and not _conclusive(process_scaling):
        return head + ": inconclusive"
    return head + ": this work releases the GIL — threads would do as well as processes"
