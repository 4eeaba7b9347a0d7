"""``profile_dataset``: every preprocess measurement in order, each phase filling its part of the report.

A phase that fails on the user's data is noted and skipped; Ctrl-C stops the run and returns what
was measured so far (``report.interrupted``). The doctor can call this directly.
"""

from __future__ import annotations

import os
import pickle
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from supplyline.errors import UserError
from supplyline.preprocess import chain as chain_mod
from supplyline.preprocess import chain_report, decode, gil, lines, profiling, suggest, timing, transfer
from supplyline.preprocess import workers as workers_mod
from supplyline.preprocess.report import PreprocessReport
from supplyline.target import resolve_dataset


class Progress(Protocol):
    def phase(self, name: str, total: int | None = None) -> None: ...
    def advance(self, n: int = 1) -> None: ...


class NullProgress:
    def phase(self, name: str, total: int | None = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass


@dataclass
class Target:
    """A dataset plus the loader settings that came with it (when the user pointed at a DataLoader)."""

    dataset: Any
    batch_size: int | None = None
    collate_fn: Callable[[list[Any]], Any] | None = None
    num_workers: int | None = None
    worker_init_fn: Callable[[int], None] | None = None
    start_method: str | None = None

    @classmethod
    def of(cls, obj: Any, name: str = "the target") -> Target:
        """Accept a map-style dataset, a DataLoader, or a class/function that builds one with no arguments."""
        found = resolve_dataset(
            obj, name, not_a_dataset="a dataset: it needs __getitem__ and __len__", iterable_ok=False
        )
        loader = found.loader
        if loader is None:
            return cls(found.dataset)
        context = loader.multiprocessing_context
        return cls(
            found.dataset,
            loader.batch_size,
            loader.collate_fn,
            loader.num_workers,
            loader.worker_init_fn,
            context.get_start_method() if context is not None else None,
        )


def pick_indices(size: int, samples: int, seed: int) -> list[int]:
    """All indices when few, else a seeded random spread over the whole dataset (sorted)."""
    if size <= samples:
        return list(range(size))
    return sorted(random.Random(seed).sample(range(size), samples))


def picklable(obj: Any) -> str | None:
    """None when ``obj`` pickles (spawn-started workers need it), else the reason in one line."""
    try:
        pickle.dumps(obj)
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".splitlines()[0]


def profile_dataset(
    dataset: Any,
    samples: int = 100,
    workers: int = 2,
    batch_size: int | None = None,
    transform_attr: str | None = None,
    prof_path: str | None = None,
    start_method: str | None = None,
    seed: int = 0,
    profile_samples: int = 50,
    line_seconds: float = 1.0,
    gil_check: bool = True,
    measure_transfer: bool = True,
    target_name: str = "",
    progress: Progress | None = None,
) -> PreprocessReport:
    """Measure where each sample's CPU time goes.

    ``dataset`` may also be a DataLoader (its batch size, collate_fn, workers' start method and
    worker_init_fn are used), a no-argument class/function building either, or a resolved ``Target``.
    """
    import torch.utils.data as tud

    target = dataset if isinstance(dataset, Target) else Target.of(dataset, target_name or "the dataset")
    ds = target.dataset
    batch_size = batch_size or target.batch_size or 32
    collate_fn = target.collate_fn or tud.default_collate
    start_method = start_method or target.start_method
    progress = progress or NullProgress()
    indices = pick_indices(len(ds), samples, seed)
    report = PreprocessReport(
        target=target_name or type(ds).__name__, dataset_type=_type_name(ds), dataset_len=len(ds), indices=indices
    )
    runner = _Runner(report, progress)
    installed = chain_mod.install(ds, transform_attr)
    times = timing.SampleTimes()
    try:
        runner.run(
            "timing __getitem__",
            len(indices),
            lambda: timing.time_samples(
                ds, indices, times, keep=batch_size * 4, chain=installed, progress=progress.advance
            ),
        )
        report.getitem, report.cpu_share, report.errors = times.distribution(), times.cpu_share(), times.errors
        report.getitem_own, report.cpu_wait_share = times.own_distribution(), times.cpu_wait_share()
        ok = times.indices
        runner.run(
            "checking determinism",
            None,
            lambda: setattr(report, "sample_deterministic", timing.check_determinism(ds, ok[:2], installed)),
        )
    finally:
        if installed:
            installed.restore()
            report.chain = chain_report.build(installed, times.own_ms, times.wall_ms, times.indices)
    if not ok:
        report.notes.append("every sample raised: nothing else to measure")
        return _finish(report, ds)

    first_batch = runner.run("timing collate", None, lambda: _collate(report, times.kept, batch_size, collate_fn))
    subset = ok[:profile_samples]
    stats = runner.run("cProfile", len(subset), lambda: _profile(report, ds, subset, prof_path, progress)) or {}
    runner.run("sampling lines", None, lambda: _lines(report, ds, subset, line_seconds, stats))
    if measure_transfer and first_batch is not None:
        runner.run(
            "worker->trainer transfer",
            None,
            lambda: setattr(
                report,
                "transfer",
                transfer.measure_transfer(first_batch, min(batch_size, len(times.kept)), start_method),
            ),
        )
    fork = (start_method or _default_start()) == "fork"
    # Forked workers inherit the dataset; only spawn/forkserver pickle it (and pickling a large
    # in-memory dataset costs a copy of it, so it is not done when nothing needs it).
    reason = None if fork else picklable(ds)
    if reason:
        report.notes.append(
            f"the dataset cannot be pickled ({reason}): DataLoader workers started with spawn or "
            "forkserver cannot receive it; measured in the main process instead of in workers"
        )
    if workers > 0 and not reason:
        prof_workers = _sibling(prof_path, "workers")
        runner.run(
            f"profiling {workers} workers",
            None,
            lambda: setattr(
                report,
                "workers",
                workers_mod.profile_workers(
                    ds,
                    ok,
                    workers,
                    batch_size,
                    collate_fn,
                    start_method,
                    target.worker_init_fn,
                    prof_workers,
                    report.getitem.mean_ms if report.getitem else None,
                ),
            ),
        )
    if gil_check:
        parallelism = max(2, min(workers or 2, os.cpu_count() or 2))
        runner.run(
            "GIL check",
            None,
            lambda: setattr(
                report,
                "gil",
                gil.check_gil(
                    ds,
                    ok,
                    (report.getitem.median_ms if report.getitem else 1.0) / 1e3,
                    parallelism,
                    start_method,
                    processes_allowed=fork or not reason,
                ),
            ),
        )
    return _finish(report, ds)


def _finish(report: PreprocessReport, ds: Any) -> PreprocessReport:
    report.suggestions = suggest.suggest(report, chain_mod.locate(type(ds).__getitem__))
    return report


class _Runner:
    """Runs phases: a phase's own failure becomes a note; Ctrl-C marks the report and skips the rest."""

    def __init__(self, report: PreprocessReport, progress: Progress) -> None:
        self.report = report
        self.progress = progress

    def run(self, name: str, total: int | None, fn: Callable[[], Any]) -> Any:
        if self.report.interrupted:
            return None
        self.progress.phase(name, total)
        try:
            return fn()
        except KeyboardInterrupt:
            self.report.interrupted = True
            self.report.notes.append(f"interrupted during {name}: later phases not run")
        except UserError:
            raise
        except Exception as exc:
            self.report.notes.append(f"{name} skipped: {type(exc).__name__}: {exc}".splitlines()[0])
        return None


def _collate(report: PreprocessReport, kept: list[Any], batch_size: int, collate_fn: Callable[..., Any]) -> Any:
    report.collate, first = timing.time_collate(kept, batch_size, collate_fn)
    return first


def _profile(
    report: PreprocessReport, ds: Any, subset: list[int], prof_path: str | None, progress: Progress
) -> profiling.RawStats:
    with decode.capture_images() as images:
        stats, done = profiling.profile_calls(ds.__getitem__, subset, after=progress.advance)
    if prof_path:
        profiling.write_prof(prof_path, stats)
    report.profile = profiling.build_report(stats, done, prof_path)
    if images and report.profile.decode_share >= suggest.DECODE_MIN_SHARE / 2:
        report.decode = decode.benchmark(images)
    return stats


def _lines(report: PreprocessReport, ds: Any, subset: list[int], seconds: float, stats: profiling.RawStats) -> None:
    sampler = lines.sample_lines(ds.__getitem__, subset, seconds)
    report.lines = lines.build_report(sampler, lambda f, first: profiling.self_share_of(stats, f, first))


def _sibling(path: str | None, tag: str) -> str | None:
    if not path:
        return None
    stem, ext = os.path.splitext(path)
    return f"{stem}.{tag}{ext or '.prof'}"


def _default_start() -> str:
    import multiprocessing

    return multiprocessing.get_start_method()


def _type_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
