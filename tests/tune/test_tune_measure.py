"""Real measurements of single configurations: real DataLoaders, real worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from supplyline.errors import UserError
from supplyline.tune.consumer import make_consumer
from supplyline.tune.measure import DatasetBroken, Measurement, epoch_rate, measure_config
from supplyline.tune.model import probe
from supplyline.tune.space import LoaderConfig
from supplyline.tune.target import resolve_target

NONE = make_consumer(None, None)


@pytest.mark.slow
def test_sleeping_items_measure_faster_with_workers(ds_import: Path) -> None:
    target = resolve_target("tune_ds:sleepy", 16)
    serial = measure_config(target, LoaderConfig(16), NONE, window_s=0.4)
    parallel = measure_config(target, LoaderConfig(16, 4, 2, True), NONE, window_s=0.4)
    assert serial.ok and parallel.ok, (serial.reason, parallel.reason)
    assert parallel.samples_per_s > 1.5 * serial.samples_per_s  # the items sleep; workers overlap them
    assert parallel.workers_rss_bytes > 0 and serial.workers_rss_bytes == 0
    assert parallel.time_to_first_batch_s is not None and parallel.restart_s is not None
    assert parallel.steady_batches >= 4


def test_probe_sees_waiting_not_computing(ds_import: Path) -> None:
    target = resolve_target("tune_ds:sleepy", 16)
    model = probe(target, NONE, 16, cores=2)
    assert model.batch_wall_s >= 16 * 0.002  # 16 items of 2 ms sleep
    assert model.batch_cpu_s < model.batch_wall_s / 3
    assert model.knee(list(range(0, 17))) > 2  # more workers than cores


@pytest.mark.slow
def test_a_crashing_worker_fails_the_configuration_with_its_reason(ds_import: Path) -> None:
    target = resolve_target("tune_ds:kills", 8)
    crashed = measure_config(target, LoaderConfig(8, 2, 2, True), NONE, window_s=0.3)
    assert crashed.status == "failed"
    assert "worker" in crashed.reason.lower()
    fine = measure_config(target, LoaderConfig(8, 1, 2, True), NONE, window_s=0.3)
    assert fine.ok, fine.reason


@pytest.mark.slow
def test_memory_limit_stops_the_configuration(ds_import: Path) -> None:
    plain = measure_config(resolve_target("tune_ds:sleepy", 8), LoaderConfig(8, 2, 2, False), NONE, window_s=0.5)
    assert plain.ok and plain.workers_pss_bytes > 0
    assert plain.workers_pss_bytes <= plain.workers_rss_bytes  # shared pages are split, not repeated
    limit = plain.workers_pss_bytes + 64 * 1024 * 1024  # each Big worker adds 64 MiB: two exceed it
    again = measure_config(
        resolve_target("tune_ds:sleepy", 8), LoaderConfig(8, 2, 2, False), NONE, window_s=0.5, max_memory_bytes=limit
    )
    assert again.ok, again.reason
    stopped = measure_config(
        resolve_target("tune_ds:big", 8), LoaderConfig(8, 2, 2, False), NONE, window_s=2.0, max_memory_bytes=limit
    )
    assert stopped.status == "stopped"
    assert "--max-memory" in stopped.reason


def test_an_item_that_raises_is_named_by_index(ds_import: Path) -> None:
    target = resolve_target("tune_ds:raises", 10)
    with pytest.raises(DatasetBroken, match=r"dataset\[37\] raised ValueError: corrupt record"):
        measure_config(target, LoaderConfig(10, 2, 2, False), NONE, window_s=0.5)


@pytest.mark.slow
def test_spawn_started_workers_import_the_dataset(ds_import: Path) -> None:
    target = resolve_target("tune_ds:spawn_loader", None)
    assert target.baseline.start_method == "spawn" and target.baseline.num_workers == 1
    m = measure_config(target, target.baseline, NONE, window_s=0.3)
    assert m.ok, m.reason


def test_a_loader_factory_gives_the_baseline_and_keeps_its_collate_fn(ds_import: Path) -> None:
    target = resolve_target("tune_ds:make_loader", None)
    assert target.from_loader
    assert target.baseline == LoaderConfig(8, 1, 2, False).normalized()
    assert target.loader_kwargs["collate_fn"].__name__ == "pair_collate"
    batch = next(iter(target.make_loader(LoaderConfig(8))))
    assert set(batch) == {"x", "n"}


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_such_module_xyz:ds", "cannot import 'no_such_module_xyz'"),
        ("tune_ds:NUMBER", "is a int, not a Dataset"),
        ("tune_ds:missing", "has no attribute 'missing'"),
        ("tune_ds:empty", "is empty"),
    ],
)
def test_unusable_targets_are_one_line_errors(ds_import: Path, spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        resolve_target(spec, 8)


def test_epoch_rate_charges_the_restart_once_per_epoch() -> None:
    assert epoch_rate(1000.0, 1.0, 1000) == pytest.approx(500.0)
    assert epoch_rate(1000.0, None, 1000) == 1000.0
    m = Measurement(
        config=LoaderConfig(8),
        samples_per_s=100.0,
        window_samples=100,
        window_s=1.0,
        restarts_in_window=1,
        restart_s=0.1,
    )
    assert m.epoch_rate_with(0.6) == pytest.approx(100 / 1.5)  # the restart inside the window got dearer


def test_a_user_consumer_gets_every_batch(ds_import: Path) -> None:
    import tune_ds

    consumer = make_consumer(None, "tune_ds:count_batch")
    target = resolve_target("tune_ds:sleepy", 8)
    m = measure_config(target, LoaderConfig(8), consumer, window_s=0.2)
    assert m.ok, m.reason
    assert len(tune_ds.SEEN) >= m.steady_batches + 1 and set(tune_ds.SEEN) == {8}
    with pytest.raises(UserError, match="not a function taking a batch"):
        make_consumer(None, "tune_ds:NUMBER")
