"""The oscillation detector on synthetic series with a known answer."""

from __future__ import annotations

import random

import pytest

from supplyline.analyze.oscillation import detect_oscillation


def _square(n: int, period: int, high_for: int, high: float = 100.0, low: float = 0.0) -> list[float]:
    return [high if i % period < high_for else low for i in range(n)]


def test_steady_series_does_not_oscillate() -> None:
    result = detect_oscillation([98.0] * 60, interval_s=1.0)
    assert not result.oscillates and result.reason.startswith("steady")


def test_periodic_drops_give_period_and_duty_cycle() -> None:
    # 0.5 s samples, 10-sample (5 s) cycle, high for 7 of them: duty 0.7.
    result = detect_oscillation(_square(80, 10, 7), interval_s=0.5)
    assert result.oscillates
    assert result.period_s == pytest.approx(5.0, rel=0.05)
    assert result.duty_cycle == pytest.approx(0.7, abs=0.05)
    assert result.drops == 8


def test_noisy_but_steady_is_no_false_alarm() -> None:
    rng = random.Random(1)
    values = [min(100.0, max(0.0, rng.gauss(92, 4))) for _ in range(200)]
    assert not detect_oscillation(values, interval_s=1.0).oscillates


def test_random_jumps_are_irregular_not_periodic() -> None:
    rng = random.Random(2)
    values = [rng.choice([5.0, 95.0]) for _ in range(120)]
    result = detect_oscillation(values, interval_s=1.0)
    assert not result.oscillates and result.reason.startswith("irregular")


def test_periodic_with_noise_and_jittered_timestamps() -> None:
    rng = random.Random(3)
    clean = _square(120, 12, 4, high=95.0, low=10.0)  # duty 1/3, period 12 samples
    values = [v + rng.gauss(0, 6) for v in clean]
    timestamps = [i * 0.25 + rng.uniform(-0.02, 0.02) for i in range(len(values))]
    result = detect_oscillation(values, timestamps=timestamps)
    assert result.oscillates
    assert result.period_s == pytest.approx(3.0, rel=0.1)
    assert result.duty_cycle == pytest.approx(1 / 3, abs=0.07)


def test_too_short_cannot_decide() -> None:
    result = detect_oscillation(_square(8, 4, 2), interval_s=1.0)
    assert not result.oscillates and result.period_s is None
    assert result.reason.startswith("too short")


def test_fewer_than_three_cycles_is_not_called_oscillating() -> None:
    result = detect_oscillation(_square(25, 10, 5), interval_s=1.0)
    assert not result.oscillates and "cycles" in result.reason


def test_worker_cpu_series_in_its_own_scale() -> None:
    # Worker CPU of a loader that works in bursts: 0..200 % (two threads), period 4 s.
    values = _square(60, 4, 2, high=190.0, low=3.0)
    result = detect_oscillation(values, interval_s=1.0)
    assert result.oscillates and result.period_s == pytest.approx(4.0)
    assert result.high_level == pytest.approx(190.0) and result.low_level == pytest.approx(3.0)
