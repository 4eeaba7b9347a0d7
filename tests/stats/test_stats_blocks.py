"""The compare gate's block bootstrap on hand-built step lists: drift inside a run widens the
interval, runs that disagree widen it more, the point is always inside, the same steps give the same
answer, and one run a side is widened by the run-to-run allowance and says so."""

from __future__ import annotations

import numpy as np
import pytest

from supplyline.analyze import stats


def _noisy(n: int, ms: float, seed: int, sd: float = 0.02) -> np.ndarray:
    return ms / 1000 * (1 + np.random.default_rng(seed).normal(0, sd, n))


def _drifting(n: int = 100, seed: int = 0) -> np.ndarray:
    """A run whose machine slows down halfway: 10 ms steps, then 12 ms steps, each ±2%."""
    half = n // 2
    return np.concatenate([_noisy(half, 10.0, seed), _noisy(n - half, 12.0, seed + 1)])


def _slowing(n: int = 100, seed: int = 0) -> np.ndarray:
    """A run whose machine slows steadily: 10 ms steps at the start, 12 ms at the end, each ±2%."""
    return 0.01 * (1 + np.linspace(0, 0.2, n) + np.random.default_rng(seed).normal(0, 0.02, n))


def test_block_length_is_about_the_square_root() -> None:
    assert [stats.block_length(n) for n in (1, 4, 39, 100, 10_000)] == [1, 2, 6, 10, 100]


def test_a_block_resample_strings_together_runs_of_consecutive_steps() -> None:
    n = 100
    rows = stats._block_resamples(np.arange(n, dtype=float), 50, np.random.default_rng(1))
    assert rows.shape == (50, n)
    breaks = (np.diff(rows, axis=1) % n != 1).sum(axis=1)  # a wrap from n-1 to 0 is still consecutive
    assert breaks.max() <= n // stats.block_length(n) - 1


def test_drift_inside_a_run_widens_the_interval() -> None:
    drifting = _slowing()
    shuffled = np.random.default_rng(5).permutation(drifting)  # the same steps, drift broken up
    blocks = stats.block_median_interval(drifting)
    assert blocks.half_width_pct > 2 * stats.block_median_interval(shuffled).half_width_pct
    # the independent-steps bootstrap cannot see the drift: the same steps give the same width either way
    assert blocks.half_width_pct > 2 * stats.median_interval(drifting).half_width_pct


def test_runs_that_disagree_widen_the_interval() -> None:
    agree = [_noisy(40, 10.0, s) for s in range(3)]
    disagree = [_noisy(40, ms, s) for s, ms in enumerate((10.0, 11.5, 10.5))]
    assert stats.block_median_interval(disagree).half_width_pct > 3 * stats.block_median_interval(agree).half_width_pct


@pytest.mark.parametrize(
    "steps",
    [
        [0.01],
        [0.01, 0.02],
        [0.003] * 30,
        list(_drifting()),
        list(np.sort(_noisy(57, 10.0, 3))),  # a monotone trend: the worst case for a median's blocks
        [list(_noisy(40, 10.0, 1)), list(_noisy(7, 14.0, 2))],  # runs of unequal length
        [list(_drifting(60, 4)), list(_noisy(60, 9.0, 5)), list(_noisy(61, 11.0, 6))],
    ],
)
def test_the_point_is_inside_its_interval(steps: list) -> None:
    ci = stats.block_median_interval(steps)
    assert ci.low <= ci.estimate <= ci.high
    ratio = stats.ratio_of_medians_interval(steps, [list(_noisy(50, 10.0, 9))])
    assert ratio.low <= ratio.estimate <= ratio.high


def test_the_same_steps_give_the_same_answer() -> None:
    runs = [list(_drifting(80, 2)), list(_noisy(80, 11.0, 3))]
    assert stats.block_median_interval(runs) == stats.block_median_interval(runs)
    first, again = stats.compare_step_times(runs[:1], runs[1:], 10), stats.compare_step_times(runs[:1], runs[1:], 10)
    assert first == again


def test_one_run_a_side_is_widened_by_the_allowance_and_says_so() -> None:
    """The issue's case: two runs of one unchanged job, 11.7% apart, each steady within itself. The
    steps alone prove a crossing of 10%; the gate must not claim what one run a side cannot show."""
    base = _noisy(39, 31.0, 1, sd=0.01)
    new = _noisy(39, 31.0 * 1.117, 2, sd=0.01)
    steps_only = stats.compare_step_times(base, new, 10, run_to_run_pct=0)
    assert steps_only.failed, "the steps alone cross the limit beyond their own noise"
    gate = stats.compare_step_times(base, new, 10)
    assert not gate.failed and "within noise" in gate.text
    assert gate.allowance_pct == stats.RUN_TO_RUN_PCT
    assert gate.decision.low == pytest.approx(gate.ratio.low / (1 + stats.RUN_TO_RUN_PCT / 100))
    assert gate.runs_note is not None and "one run on BASE and NEW" in gate.runs_note
    # 40% slower is beyond the limit and the allowance together
    assert stats.compare_step_times(base, _noisy(39, 31.0 * 1.4, 3, sd=0.01), 10).failed


def test_two_runs_a_side_measure_the_spread_instead() -> None:
    base = [_noisy(39, 31.0, 1), _noisy(39, 31.5, 2)]
    new = [_noisy(39, 31.2, 3), _noisy(39, 30.8, 4)]
    gate = stats.compare_step_times(base, new, 10)
    assert gate.runs_note is None and gate.allowance_pct == 0 and gate.decision == gate.ratio
    assert not gate.failed
    one_side = stats.compare_step_times(base, new[:1], 10)
    assert one_side.runs_note is not None and "one run on NEW:" in one_side.runs_note
