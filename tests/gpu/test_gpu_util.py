"""NVML utilization aligned with hand-built step windows."""

from __future__ import annotations

import pytest

from supplyline.analyze.gpu_util import gpu_util_timeline, per_step_utilization, util_series


def test_each_sample_speaks_for_the_window_before_it() -> None:
    # Samples every second, each covering the second before it; steps of 0.5 s.
    points = [(1.0, 100.0), (2.0, 0.0), (3.0, 50.0)]
    windows = [(0.0, 0.5), (0.5, 1.0), (1.0, 1.5), (2.25, 2.75)]
    assert per_step_utilization(windows, points, window_s=1.0) == [100.0, 100.0, 0.0, 50.0]


def test_a_step_across_two_samples_is_weighted_by_overlap() -> None:
    points = [(1.0, 100.0), (2.0, 0.0)]
    assert per_step_utilization([(0.75, 1.25)], points, 1.0) == [pytest.approx(50.0)]
    assert per_step_utilization([(0.5, 1.25)], points, 1.0) == [pytest.approx(100 * 0.5 / 0.75)]


def test_steps_without_samples_are_none() -> None:
    assert per_step_utilization([(5.0, 6.0)], [(1.0, 90.0)], 1.0) == [None]
    assert gpu_util_timeline([(0.0, 1.0)], []).per_step_pct == [None]


def test_saw_tooth_is_detected_by_the_periodic_drop_detector() -> None:
    # 100% for 2 s, 0% for 2 s, eight times: a GPU starved every 4 s.
    points = [(t * 0.5, 100.0 if (t // 4) % 2 == 0 else 0.0) for t in range(64)]
    windows = [(i * 0.1, i * 0.1 + 0.1) for i in range(300)]
    res = gpu_util_timeline(windows, points, window_s=0.5)
    assert res.oscillation is not None and res.oscillation.oscillates
    assert res.oscillation.period_s == pytest.approx(4.0)
    assert res.per_step_pct[0] == 100.0 and res.per_step_pct[25] == 0.0
    assert res.mean_pct == pytest.approx(50.0, abs=5)


def test_steady_busy_gpu_does_not_oscillate() -> None:
    points = [(t * 0.5, 97.0 + (t % 3)) for t in range(40)]
    res = gpu_util_timeline([(0.0, 20.0)], points, window_s=0.5)
    assert res.oscillation is not None and not res.oscillation.oscillates
    assert res.note == ""


def test_few_samples_say_so() -> None:
    res = gpu_util_timeline([(0.0, 0.3)], [(0.5, 80.0)], window_s=1.0)
    assert res.note.startswith("only 1 utilization sample")
    assert res.oscillation is None


def test_util_series_picks_one_device_and_moves_to_the_step_clock() -> None:
    samples = [
        {"time_unix_s": 1000.5, "gpus": [{"index": 0, "util_pct": 10.0}, {"index": 1, "util_pct": 90.0}]},
        {"time_unix_s": 1001.5, "gpus": [{"index": 1, "util_pct": None}]},
        {"time_unix_s": 1002.5, "gpus": []},
    ]
    assert util_series(samples, 1, t0_unix_s=1000.0) == [(0.5, 90.0)]
    assert util_series(samples, 0, t0_unix_s=1000.0) == [(0.5, 10.0)]
