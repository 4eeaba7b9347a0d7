"""The search: model-guided, then measured; cheaper than a grid because most knobs are not
independent dimensions.

1. For each batch size, a probe fits the saturating model (model.py) and names the knee: the
   fewest workers predicted to reach the plateau. Only the knee and its neighbours on the worker
   ladder are measured, then the search climbs along the ladder while a neighbour is faster.
2. The finalists (within a few percent of the best) are measured again; rates are medians.
3. prefetch_factor is tried upward at the best worker count only, stopping when it stops helping.
4. persistent_workers does not change the steady rate, only the cost of each new epoch: one
   persistent run measures both (its reset, and its cold start = what a non-persistent epoch pays).
5. pin_memory (only with CUDA) and other start methods are tried at the best configuration only.
The measuring function and the clock are injected, so the logic is tested on a fake model.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from supplyline.tune.measure import Measurement
from supplyline.tune.model import ThroughputModel
from supplyline.tune.space import PREFETCH_LADDER, LoaderConfig

MeasureFn = Callable[[LoaderConfig, float], Measurement]
ProgressFn = Callable[[str, float], None]


@dataclass
class SearchPlan:
    batch_sizes: list[int]
    ladder: list[int]  # worker counts the search may try
    budget_s: float
    window_s: float  # steady-state seconds per configuration
    prefetch_ladder: tuple[int, ...] = PREFETCH_LADDER
    try_pin_memory: bool = False  # only where a CUDA device exists
    start_methods: list[str] = field(default_factory=list)  # alternatives to the default
    tie: float = 0.02  # within this, prefer fewer workers / less prefetch
    finalist_band: float = 0.05  # configs this close to the best get a repeat
    max_finalists: int = 3


@dataclass
class SearchResult:
    baseline: Measurement
    recommended: Measurement | None
    measurements: list[Measurement]
    models: dict[int, ThroughputModel]
    elapsed_s: float
    interrupted: bool = False
    skipped_for_budget: int = 0


class Search:
    def __init__(
        self,
        plan: SearchPlan,
        measure: MeasureFn,
        model_for: Callable[[int], ThroughputModel],
        baseline: LoaderConfig,
        clock: Callable[[], float] = time.perf_counter,
        on_progress: ProgressFn | None = None,
    ) -> None:
        self.plan = plan
        self._measure = measure
        self._model_for = model_for
        self._baseline_config = baseline.normalized()
        self._clock = clock
        self._on_progress = on_progress
        self._start = 0.0
        self._results: dict[LoaderConfig, Measurement] = {}
        self._models: dict[int, ThroughputModel] = {}
        self._skipped = 0

    # -- bookkeeping -------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self._clock() - self._start

    def _affordable(self) -> bool:
        typical = max(
            (m.measured_s for m in self._results.values() if m.derived_from is None), default=self.plan.window_s * 1.4
        )
        return self.elapsed() + typical <= self.plan.budget_s

    def _run(self, config: LoaderConfig, required: bool = False) -> Measurement | None:
        config = config.normalized()
        if config in self._results:
            return self._results[config]
        if not required and not self._affordable():
            self._skipped += 1
            return None
        if self._on_progress:
            self._on_progress(f"measuring {config.label()}", self.elapsed())
        result = self._measure(config, self.plan.window_s)
        self._results[config] = result
        self._derive_non_persistent(result)
        if self._on_progress:
            self._on_progress(f"measured {config.label()}", self.elapsed())
        return result

    def _derive_non_persistent(self, run: Measurement) -> None:
        """A persistent run also tells what the same config costs without persistence: the same
        steady rate, and every epoch paying the cold start its first batch took."""
        c = run.config
        if not run.ok or c.num_workers == 0 or not c.persistent_workers:
            return
        twin = replace(c, persistent_workers=False)
        if twin in self._results:
            return
        self._results[twin] = self._twin(run, twin)

    @staticmethod
    def _twin(run: Measurement, twin: LoaderConfig) -> Measurement:
        derived = copy.copy(run)
        derived.config, derived.derived_from = twin, run.config.label()
        derived.restart_s = run.time_to_first_batch_s
        derived.measured_s = 0.0
        derived.epoch_runs = [run.epoch_rate_with(derived.restart_s)]
        derived.epoch_samples_per_s = derived.epoch_runs[0]
        derived.runs = list(run.runs)
        return derived

    def _point(self, batch_size: int, workers: int) -> LoaderConfig:
        return LoaderConfig(batch_size, workers, 2, persistent_workers=workers > 0).normalized()

    def best(self, pool: list[Measurement] | None = None) -> Measurement | None:
        """The highest epoch rate; within ``tie`` of it, the fewest workers, then least prefetch."""
        pool = [m for m in (pool if pool is not None else self._results.values()) if m.ok]
        if not pool:
            return None
        top = max(m.score() for m in pool)
        close = [m for m in pool if m.score() >= (1 - self.plan.tie) * top]
        return min(
            close,
            key=lambda m: (
                m.config.num_workers,
                m.config.prefetch_factor or 0,
                not m.config.persistent_workers,
                -m.score(),
            ),
        )

    # -- the stages --------------------------------------------------------------------------
    def run(self) -> SearchResult:
        self._start = self._clock()
        interrupted = False
        baseline: Measurement | None = None
        try:
            baseline = self._run(self._baseline_config, required=True)
            for batch_size in self.plan.batch_sizes:
                self._climb_workers(batch_size)
            self._repeat_finalists()
            self._climb_prefetch()
            self._try_variants()
        except KeyboardInterrupt:
            interrupted = True  # keep what was measured
        if baseline is None:
            baseline = Measurement(
                config=self._baseline_config, status="failed", reason="interrupted before it was measured"
            )
        return SearchResult(
            baseline=baseline,
            recommended=self.best(),
            measurements=list(self._results.values()),
            models=dict(self._models),
            elapsed_s=self.elapsed(),
            interrupted=interrupted,
            skipped_for_budget=self._skipped,
        )

    def _climb_workers(self, batch_size: int) -> None:
        ladder = self.plan.ladder
        model = self._models[batch_size] = self._model_for(batch_size)
        start = ladder.index(model.knee(ladder))
        self._run(self._point(batch_size, ladder[start]), required=True)
        for i in (start - 1, start + 1):
            if 0 <= i < len(ladder):
                self._run(self._point(batch_size, ladder[i]))
        while True:  # climb while an unmeasured neighbour of the best could be better
            on_ladder = [self._results.get(self._point(batch_size, w)) for w in ladder]
            measured = [i for i, m in enumerate(on_ladder) if m is not None]
            best_i = max(measured, key=lambda i: on_ladder[i].score())  # type: ignore[union-attr]  # measured: indices of non-None
            todo = [i for i in (best_i - 1, best_i + 1) if 0 <= i < len(ladder) and on_ladder[i] is None]
            if not todo or self._run(self._point(batch_size, ladder[todo[0]])) is None:
                return

    def _repeat_finalists(self) -> None:
        """Noise: configurations close to the best are measured again and take the median."""
        ok = [m for m in self._results.values() if m.ok and m.derived_from is None]
        if not ok:
            return
        top = max(m.score() for m in ok)
        finalists = sorted(
            (m for m in ok if m.score() >= (1 - self.plan.finalist_band) * top), key=lambda m: -m.score()
        )[: self.plan.max_finalists]
        if len(finalists) < 2:
            return  # a clear winner: a repeat would not change the pick
        for m in finalists:
            if not self._affordable():
                self._skipped += 1
                return
            if self._on_progress:
                self._on_progress(f"repeating {m.config.label()}", self.elapsed())
            repeat = self._measure(m.config, self.plan.window_s)
            m.add_run(repeat)
            twin_config = replace(m.config, persistent_workers=False)
            twin = self._results.get(twin_config)
            if twin is not None and twin.derived_from and repeat.ok:
                twin.add_run(self._twin(repeat, twin_config))

    def _climb_prefetch(self) -> None:
        best = self.best()
        if best is None or best.config.num_workers == 0:
            return
        current = best
        for factor in self.plan.prefetch_ladder:
            if factor <= (current.config.prefetch_factor or 0):
                continue
            trial = self._run(replace(current.config, prefetch_factor=factor, persistent_workers=True))
            if trial is None or trial.score() <= current.score() * (1 + self.plan.tie):
                return  # not clearly better: deeper queues only cost memory
            current = trial

    def _try_variants(self) -> None:
        best = self.best()
        if best is None or best.config.num_workers == 0:
            return
        if self.plan.try_pin_memory:
            self._run(replace(best.config, pin_memory=True))
        for method in self.plan.start_methods:
            self._run(replace(best.config, start_method=method))
