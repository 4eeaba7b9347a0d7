"""Profile inside real DataLoader workers: one cProfile per worker, merged with pstats afterwards.

The profiler is switched on only around ``__getitem__`` and ``collate_fn`` (through picklable
wrappers), so time a worker spends waiting for the next index does not drown the profile. Each
worker writes its stats when it exits, through ``multiprocessing.util.Finalize`` — which runs in
fork- and spawn-started children alike, where ``atexit`` would not.
"""

from __future__ import annotations

import cProfile
import functools
import glob
import json
import multiprocessing.util
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from supplyline.preprocess import profiling
from supplyline.preprocess.report import WorkerProfile, WorkersReport

_worker_state: dict[str, Any] = {}


def _init_worker(out_dir: str, user_init: Callable[[int], None] | None, worker_id: int) -> None:
    profiler = cProfile.Profile()
    _worker_state.update(profiler=profiler, times_ms=[], worker_id=worker_id)
    stem = os.path.join(out_dir, f"worker-{worker_id}-{os.getpid()}")

    def dump() -> None:
        profiler.create_stats()
        profiling.write_prof(stem + ".prof", profiler.stats)
        with open(stem + ".json", "w") as fh:
            json.dump({"worker_id": worker_id, "pid": os.getpid(), "times_ms": _worker_state["times_ms"]}, fh)

    multiprocessing.util.Finalize(None, dump, exitpriority=100)
    if user_init is not None:
        user_init(worker_id)


def _profiled(fn: Callable[..., Any], *args: Any) -> Any:
    profiler = _worker_state.get("profiler")
    if profiler is None:  # not in a profiled worker (e.g. num_workers=0): just call
        return fn(*args)
    profiler.enable()
    try:
        return fn(*args)
    finally:
        profiler.disable()


class ProfiledDataset:
    """Forwards to the user's dataset, profiling and timing each ``__getitem__`` in the worker."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        start = time.perf_counter()
        try:
            return _profiled(self.dataset.__getitem__, index)
        finally:
            _worker_state.setdefault("times_ms", []).append((time.perf_counter() - start) * 1e3)


class ProfiledCollate:
    def __init__(self, collate_fn: Callable[[list[Any]], Any]) -> None:
        self.collate_fn = collate_fn

    def __call__(self, batch: list[Any]) -> Any:
        return _profiled(self.collate_fn, batch)


def profile_workers(
    dataset: Any,
    indices: list[int],
    workers: int,
    batch_size: int,
    collate_fn: Callable[[list[Any]], Any],
    start_method: str | None,
    user_init: Callable[[int], None] | None,
    merged_path: str | None,
    main_mean_ms: float | None,
) -> WorkersReport:
    """Run the indices through a DataLoader with ``workers`` workers, each profiled; merge the profiles."""
    import torch.utils.data as tud

    with tempfile.TemporaryDirectory(prefix="supplyline-workers-") as out_dir:
        loader: tud.DataLoader[Any] = tud.DataLoader(
            ProfiledDataset(dataset),  # type: ignore[arg-type]  # a map-style dataset by protocol, not by subclass
            batch_size=batch_size,
            sampler=indices,
            num_workers=workers,
            collate_fn=ProfiledCollate(collate_fn),
            worker_init_fn=functools.partial(_init_worker, out_dir, user_init),
            multiprocessing_context=start_method,
            timeout=300,
        )
        batches = 0
        iterator = iter(loader)
        try:
            for _ in iterator:
                batches += 1
        finally:
            iterator._shutdown_workers()  # type: ignore[attr-defined]  # workers exit and write now
            del iterator
        prof_files = sorted(glob.glob(os.path.join(out_dir, "worker-*.prof")))
        per_worker = [_summarize(path) for path in prof_files]
        merged = profiling.merge(prof_files) if prof_files else {}
    if merged and merged_path:
        profiling.write_prof(merged_path, merged)
    calls = sum(w.getitem_calls for w in per_worker)
    worker_mean = sum(w.getitem_mean_ms * w.getitem_calls for w in per_worker) / calls if calls else None
    ratio = worker_mean / main_mean_ms if worker_mean and main_mean_ms else None
    return WorkersReport(
        workers=workers,
        start_method=start_method or _default_start_method(),
        batches=batches,
        per_worker=per_worker,
        merged_prof_path=merged_path if merged else None,
        top=profiling.top_functions(merged, calls, n=10),
        main_vs_worker_ratio=ratio,
    )


def _summarize(prof_path: str) -> WorkerProfile:
    with open(prof_path[: -len(".prof")] + ".json") as fh:
        info = json.load(fh)
    stats = profiling.merge([prof_path])
    top = profiling.top_functions(stats, 1, n=1)
    times = info["times_ms"]
    return WorkerProfile(
        worker_id=info["worker_id"],
        pid=info["pid"],
        getitem_calls=len(times),
        getitem_mean_ms=sum(times) / len(times) if times else 0.0,
        top_function=str(top[0].location) if top else "",
    )


def _default_start_method() -> str:
    import multiprocessing

    return multiprocessing.get_start_method()
