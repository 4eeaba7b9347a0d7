"""The search logic on a fake, deterministic throughput model: no processes, no clocks."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import pytest

from supplyline.tune.measure import Measurement
from supplyline.tune.model import ThroughputModel
from supplyline.tune.search import Search, SearchPlan
from supplyline.tune.space import LoaderConfig, worker_ladder

CORES = 2
LADDER = worker_ladder(CORES)  # [0, 1, 2, 3, 4, 5, 7, 9, 12, 16]


@dataclass
class FakePipeline:
    """min(consumer, per-worker x workers, cores bound), with optional IPC cost, crashes and noise."""

    per_worker: float  # samples/s one worker makes
    cores_bound: float  # samples/s all cores can make
    serial: float  # samples/s with no workers
    consumer: float = math.inf
    ipc_loss_per_worker: float = 0.0  # fraction of throughput each worker costs in IPC
    prefetch_gain: dict[int, float] = field(default_factory=lambda: {2: 1.0, 4: 1.0, 8: 1.0})
    crash_from: int | None = None
    noise: float = 0.0
    epoch_samples: int = 1_000_000
    now: float = 0.0
    calls: list[LoaderConfig] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(7))

    def true_rate(self, c: LoaderConfig) -> float:
        if c.num_workers == 0:
            return self.serial
        rate = min(self.consumer, self.per_worker * c.num_workers, self.cores_bound)
        rate /= 1 + self.ipc_loss_per_worker * c.num_workers
        return rate * self.prefetch_gain.get(c.prefetch_factor or 2, 1.0)

    def measure(self, c: LoaderConfig, window_s: float) -> Measurement:
        self.calls.append(c)
        startup = 0.02 + 0.05 * c.num_workers
        self.now += window_s * 1.4 + startup
        m = Measurement(config=c, epoch_samples=self.epoch_samples, measured_s=window_s * 1.4 + startup)
        if self.crash_from is not None and c.num_workers >= self.crash_from:
            m.status, m.reason = "failed", "RuntimeError: DataLoader worker (pid 1234) is killed by signal: Killed."
            return m
        m.samples_per_s = self.true_rate(c) * (1 + self.noise * (2 * self.rng.random() - 1))
        m.time_to_first_batch_s = startup
        m.restart_s = 0.005 if c.persistent_workers else startup
        m.finish()
        return m

    def model(self, batch_size: int) -> ThroughputModel:
        """What a probe in the main process would see (it cannot see IPC or crashes)."""
        consumer_s = batch_size / self.consumer if math.isfinite(self.consumer) else 0.0
        return ThroughputModel(
            batch_size=batch_size,
            batch_wall_s=batch_size / self.per_worker,
            batch_cpu_s=CORES * batch_size / self.cores_bound,
            consumer_wall_s=consumer_s,
            consumer_cpu_s=0.0,
            cores=CORES,
        )

    def grid_best(self, batch_size: int = 64) -> float:
        return max(
            self.true_rate(LoaderConfig(batch_size, w, pf, True).normalized()) for w in LADDER for pf in (2, 4, 8)
        )


def run_search(fake: FakePipeline, budget_s: float = 1000.0, **plan_kw: object):
    plan = SearchPlan(batch_sizes=[64], ladder=LADDER, budget_s=budget_s, window_s=1.0, **plan_kw)  # type: ignore[arg-type]
    search = Search(plan, fake.measure, fake.model, LoaderConfig(64), clock=lambda: fake.now)
    return search.run()


GRID_SIZE = 1 + (len(LADDER) - 1) * 3 * 2  # workers x prefetch x persistent, w=0 once


def test_cpu_bound_finds_the_grid_best_with_a_fraction_of_the_runs() -> None:
    fake = FakePipeline(per_worker=400, cores_bound=700, serial=380)
    result = run_search(fake)
    assert result.recommended is not None
    assert fake.true_rate(result.recommended.config) >= 0.97 * fake.grid_best()
    assert result.recommended.config.num_workers == 2  # the knee: 2 x 400 > 700
    assert len(fake.calls) <= 0.25 * GRID_SIZE


def test_io_bound_goes_past_the_cores() -> None:
    fake = FakePipeline(per_worker=100, cores_bound=5000, serial=95)
    result = run_search(fake)
    assert result.recommended is not None
    assert result.recommended.config.num_workers == max(LADDER)
    assert result.recommended.config.num_workers > CORES
    assert fake.true_rate(result.recommended.config) >= 0.97 * fake.grid_best()


def test_consumer_bound_stops_at_the_fewest_workers_that_keep_up() -> None:
    fake = FakePipeline(per_worker=300, cores_bound=5000, serial=200, consumer=1000)
    result = run_search(fake)
    assert result.recommended is not None
    assert result.recommended.config.num_workers == 4  # 4 x 300 >= 1000 > 3 x 300


def test_ipc_bound_climbs_down_to_no_workers() -> None:
    # The probe cannot see IPC, so the model's knee is wrong; measuring neighbours corrects it.
    fake = FakePipeline(per_worker=2000, cores_bound=3000, serial=1900, ipc_loss_per_worker=0.5)
    result = run_search(fake)
    assert result.recommended is not None
    assert result.recommended.config.num_workers == 0
    assert fake.true_rate(result.recommended.config) >= 0.97 * fake.grid_best()


def test_crashing_configurations_are_marked_failed_and_the_search_goes_on() -> None:
    fake = FakePipeline(per_worker=100, cores_bound=5000, serial=95, crash_from=7)
    result = run_search(fake)
    failed = [m for m in result.measurements if m.status == "failed"]
    assert failed and all("killed by signal" in m.reason for m in failed)
    assert result.recommended is not None and result.recommended.config.num_workers == 5


def test_noise_gets_repeats_and_medians() -> None:
    fake = FakePipeline(per_worker=300, cores_bound=5000, serial=200, consumer=1000, noise=0.03)
    result = run_search(fake)
    repeated = [m for m in result.measurements if len(m.runs) > 1 and m.derived_from is None]
    assert repeated, "finalists within the noise band are measured again"
    for m in repeated:
        assert m.samples_per_s == pytest.approx(
            sorted(m.runs)[len(m.runs) // 2] if len(m.runs) % 2 else sum(sorted(m.runs)[len(m.runs) // 2 - 1 :][:2]) / 2
        )
    assert result.recommended is not None
    assert fake.true_rate(result.recommended.config) >= 0.97 * fake.grid_best()


def test_prefetch_is_raised_only_while_it_helps() -> None:
    fake = FakePipeline(per_worker=300, cores_bound=900, serial=280, prefetch_gain={2: 1.0, 4: 1.1, 8: 1.1})
    result = run_search(fake)
    assert result.recommended is not None
    assert result.recommended.config.prefetch_factor == 4  # 8 is no better: not worth its memory
    assert any(c.prefetch_factor == 8 for c in fake.calls)


def test_persistence_is_derived_not_run_twice() -> None:
    fake = FakePipeline(per_worker=400, cores_bound=700, serial=380, epoch_samples=2000)
    result = run_search(fake)
    assert not any(c.num_workers and not c.persistent_workers for c in fake.calls)
    twins = [m for m in result.measurements if m.derived_from]
    assert twins
    for twin in twins:
        persistent = next(m for m in result.measurements if m.config.label() == twin.derived_from)
        assert twin.samples_per_s == persistent.samples_per_s
        assert twin.epoch_samples_per_s < persistent.epoch_samples_per_s  # a cold start every epoch
    assert result.recommended is not None and result.recommended.config.persistent_workers


def test_budget_limits_the_search_and_still_recommends() -> None:
    fake = FakePipeline(per_worker=100, cores_bound=5000, serial=95)
    result = run_search(fake, budget_s=5.0)  # room for the required runs only
    assert result.skipped_for_budget > 0
    assert len(fake.calls) <= 3
    assert result.recommended is not None


def test_interrupt_keeps_what_was_measured() -> None:
    fake = FakePipeline(per_worker=100, cores_bound=5000, serial=95)
    real_measure = fake.measure

    def measure(c: LoaderConfig, window_s: float) -> Measurement:
        if len(fake.calls) == 3:
            raise KeyboardInterrupt
        return real_measure(c, window_s)

    plan = SearchPlan(batch_sizes=[64], ladder=LADDER, budget_s=1000, window_s=1.0)
    result = Search(plan, measure, fake.model, LoaderConfig(64), clock=lambda: fake.now).run()
    assert result.interrupted
    assert len([m for m in result.measurements if m.derived_from is None]) == 3
    assert result.recommended is not None


def test_batch_sizes_are_compared_in_samples_per_second() -> None:
    @dataclass
    class PerBatchOverhead(FakePipeline):
        def true_rate(self, c: LoaderConfig) -> float:  # a fixed cost per batch favours big batches
            return super().true_rate(c) * c.batch_size / (c.batch_size + 32)

    fake = PerBatchOverhead(per_worker=400, cores_bound=700, serial=380)
    plan = SearchPlan(batch_sizes=[32, 128], ladder=LADDER, budget_s=1000, window_s=1.0)
    result = Search(plan, fake.measure, fake.model, LoaderConfig(32), clock=lambda: fake.now).run()
    assert result.recommended is not None and result.recommended.config.batch_size == 128
    assert set(result.models) == {32, 128}


def test_pin_memory_tried_only_when_asked() -> None:
    fake = FakePipeline(per_worker=400, cores_bound=700, serial=380)
    run_search(fake)
    assert not any(c.pin_memory for c in fake.calls)
    fake = FakePipeline(per_worker=400, cores_bound=700, serial=380)
    run_search(fake, try_pin_memory=True)
    assert any(c.pin_memory for c in fake.calls)
