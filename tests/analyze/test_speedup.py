"""Every branch of the speed-up model, on chosen numbers."""

from __future__ import annotations

import pytest

from supplyline.analyze.speedup import MAX_REMOVAL_SPEEDUP, InputModel, input_speedup, removal_speedup


def test_removal_speedup_is_one_over_the_rest_and_capped() -> None:
    assert removal_speedup(0.0) == 1.0
    assert removal_speedup(0.5) == pytest.approx(2.0)
    assert removal_speedup(0.99) == MAX_REMOVAL_SPEEDUP


def test_no_step_time_falls_back_to_removal() -> None:
    m = InputModel(step_s=0.0, wait_share=0.5, batches_per_step=1.0, cores=2)
    assert input_speedup(m, 0, 2, scales_past_cores=False) == pytest.approx(2.0)


def test_workers_zero_without_whatif_uses_the_wait_as_the_producer() -> None:
    # 10 ms step, 8 ms of it loading: one process makes a batch in 8 ms, the consumer needs 2 ms.
    m = InputModel(step_s=0.010, wait_share=0.8, batches_per_step=1.0, cores=2)
    # CPU-bound: r = p * cores / (1 + p * c) with p = 125/s, c = 2 ms: 250 / 1.25 = 200 steps/s = 2x.
    assert input_speedup(m, 0, 2, scales_past_cores=False) == pytest.approx(2.0)
    # Latency-bound reads scale past the cores: 4 workers = 500/s, capped by the consumer (500/s) and removal (5x).
    assert input_speedup(m, 0, 4, scales_past_cores=True) == pytest.approx(5.0)


def test_whatif_rates_bound_the_gain() -> None:
    # Observed 100 steps/s; the consumer alone 400/s; the loader drained at 150 batches/s with 1 worker.
    m = InputModel(0.010, 0.75, 1.0, cores=8, compute_only_step_s=0.0025, loader_only_batches_per_s=150.0)
    gain = input_speedup(m, 1, 4, scales_past_cores=True)
    assert gain == pytest.approx(4.0)  # producer 600/s, consumer 400/s: the consumer bounds it
    gain_cpu = input_speedup(m, 1, 2, scales_past_cores=False)
    # p = 150/s per process, 2 cores: 300 / (1 + 150 * 0.0025) = 218.2/s -> 2.18x
    assert gain_cpu == pytest.approx(300 / 1.375 / 100, rel=1e-6)


def test_workers_already_running_without_whatif_is_removal() -> None:
    m = InputModel(step_s=0.010, wait_share=0.4, batches_per_step=1.0, cores=2)
    assert input_speedup(m, 2, 4, scales_past_cores=True) == pytest.approx(removal_speedup(0.4))


def test_gain_never_below_one_nor_above_removing_the_wait() -> None:
    slow_loader = InputModel(0.010, 0.2, 1.0, cores=2, compute_only_step_s=0.008, loader_only_batches_per_s=10.0)
    assert input_speedup(slow_loader, 1, 1, scales_past_cores=False) == 1.0
    fast = InputModel(0.010, 0.2, 1.0, cores=64, compute_only_step_s=0.0001, loader_only_batches_per_s=1e6)
    assert input_speedup(fast, 1, 64, scales_past_cores=True) == pytest.approx(removal_speedup(0.2))
