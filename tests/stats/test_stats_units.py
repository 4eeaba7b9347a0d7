"""analyze/stats on synthetic data: known distributions, ties, tiny samples, identical samples."""

from __future__ import annotations

import numpy as np
import pytest

from supplyline.analyze import stats


def _lognormal(n: int, scale: float = 1.0, seed: int = 0) -> list[float]:
    return list(scale * np.random.default_rng(seed).lognormal(np.log(0.002), 0.3, n))


@pytest.mark.parametrize("n", [7, 8, 61, 200])
def test_bootstrap_medians_match_a_brute_force_bootstrap(n: int) -> None:
    """The Beta order-statistic shortcut must give the distribution that resampling would."""
    x = np.array(_lognormal(n, seed=n))
    rng = np.random.default_rng(99)
    brute = np.median(rng.choice(x, size=(20000, n)), axis=1)
    exact = stats.bootstrap_medians(list(x), 20000)
    qs = [0.025, 0.25, 0.5, 0.75, 0.975]
    # Both are quantiles of the same discrete distribution; 20000 draws pin them to neighbouring values.
    assert np.allclose(np.quantile(brute, qs), np.quantile(exact, qs), rtol=0.03)


def test_two_level_bootstrap_matches_resampling_runs_then_steps() -> None:
    rng = np.random.default_rng(3)
    runs = [list(rng.normal(m, 0.1, 40)) for m in (1.0, 1.1, 0.95, 1.05)]
    brute = []
    for _ in range(5000):
        pool = np.concatenate([runs[i] for i in rng.integers(0, 4, 4)])
        brute.append(np.median(rng.choice(pool, pool.size)))
    exact = stats.bootstrap_medians(runs, 5000)
    assert np.allclose(np.quantile(brute, [0.025, 0.5, 0.975]), np.quantile(exact, [0.025, 0.5, 0.975]), atol=0.01)


def test_median_interval_covers_the_true_median_at_about_its_level() -> None:
    """Lognormal steps have a known median (2 ms): a 95% interval should contain it ~95% of the time."""
    hits = sum(stats.median_interval(_lognormal(80, seed=s)).contains(0.002) for s in range(200))
    assert 180 <= hits <= 200


def test_median_interval_is_reproducible_and_shrinks_with_more_steps() -> None:
    few, many = _lognormal(50), _lognormal(5000)
    assert stats.median_interval(few) == stats.median_interval(few)  # fixed seed: same report every time
    assert stats.median_interval(many).half_width_pct < stats.median_interval(few).half_width_pct / 4


def test_steps_per_s_interval_is_the_inverted_median_interval() -> None:
    x = _lognormal(101)
    med, rate = stats.median_interval(x), stats.steps_per_s_interval(x)
    assert rate.estimate == pytest.approx(1 / med.estimate)
    assert rate.low == pytest.approx(1 / med.high) and rate.high == pytest.approx(1 / med.low)


def test_identical_and_single_steps_give_a_zero_width_interval() -> None:
    for x in ([0.003] * 30, [0.003]):
        ci = stats.median_interval(x)
        assert ci.low == ci.estimate == ci.high == 0.003 and ci.half_width_pct == 0


def test_no_steps_is_an_error() -> None:
    with pytest.raises(ValueError):
        stats.median_interval([])


def test_wilson_interval_known_values() -> None:
    ci = stats.wilson_interval(1, 3)  # textbook: 1 of 3 at 95% is 0.061 to 0.792
    assert ci.low == pytest.approx(0.0615, abs=1e-3) and ci.high == pytest.approx(0.7923, abs=1e-3)
    zero = stats.wilson_interval(0, 100)
    assert zero.low == 0 and 0.03 < zero.high < 0.04
    assert stats.wilson_interval(0, 0).high == 1.0  # no samples: anything is possible


def test_share_rule_needs_enough_samples_and_a_narrow_interval() -> None:
    assert not stats.share_is_reliable(1, 3)  # the "other 34%" from 3 samples
    assert not stats.share_is_reliable(0, stats.MIN_SHARE_SAMPLES - 1)
    assert not stats.share_is_reliable(20, 40)  # 50% ± 15 pt: too wide
    assert stats.share_is_reliable(60, 120)  # 50% ± 9 pt
    assert stats.share_is_reliable(0, 3000) and stats.share_is_reliable(3000, 3000)


def test_share_text_says_too_few_or_gives_the_number_with_its_spread() -> None:
    assert stats.share_text(1, 3) == "3 samples: too few to tell; run longer (more --steps or --seconds)"
    assert stats.share_text(0, 1, advice="use --sample-hz") == "1 sample: too few to tell; use --sample-hz"
    assert stats.share_text(60, 120) == "50% (±9 pt, 120 samples)"


def test_a_hand_built_record_with_three_samples_has_no_reliable_line_share() -> None:
    """Three stack samples of a 60-step run, one on a user line: no line share may print as a number."""
    line_samples = [
        {"file": "train.py", "line": 12, "phase": "unhooked", "category": "user", "samples": 1},
        {"file": "torch/nn/modules/linear.py", "line": 125, "phase": "unhooked", "category": "torch", "samples": 2},
    ]
    total = sum(s["samples"] for s in line_samples)
    for s in line_samples:
        assert not stats.share_is_reliable(s["samples"], total)
        assert stats.share_text(s["samples"], total).startswith("3 samples: too few to tell")
        assert "%" not in stats.share_text(s["samples"], total)


def test_interval_text() -> None:
    assert stats.interval_text(stats.Interval(1.8, 1.71, 1.93), " ms", 2) == "1.80 ms (95% CI 1.71–1.93 ms)"


def test_step_time_text_gives_both_intervals() -> None:
    text = stats.step_time_text([0.002] * 10)
    assert text == "median step 2.00 ms (95% CI 2.00–2.00) · 500.0 steps/s (500.0–500.0)"
    spread = stats.step_time_text(_lognormal(100))
    assert spread.startswith("median step ") and "95% CI" in spread and "steps/s (" in spread


def test_mann_whitney_directions_and_known_value() -> None:
    base, new = _lognormal(60, seed=1), _lognormal(60, 1.3, seed=2)
    assert stats.mann_whitney_greater(new, base) < 1e-6
    assert stats.mann_whitney_greater(base, new) > 0.999
    # Complete separation of 3 vs 3: U = 9, mean 4.5, sd sqrt(5.25); with continuity z = 1.746, p = 0.040.
    assert stats.mann_whitney_greater([4, 5, 6], [1, 2, 3]) == pytest.approx(0.0404, abs=1e-3)


def test_mann_whitney_handles_ties_and_identical_samples() -> None:
    assert stats.mann_whitney_greater([1.0] * 10, [1.0] * 10) == 0.5
    # Heavy ties: the tie correction shrinks the variance, so the same shift is more significant.
    tied = stats.mann_whitney_greater([1, 2, 2, 2, 2, 3], [1, 1, 1, 1, 2, 2])
    assert 0 < tied < 0.05
    assert stats.mann_whitney_greater([], [1.0]) == 1.0


def test_same_distribution_is_never_a_significant_slowdown() -> None:
    fails = [
        stats.compare_step_times(_lognormal(60, seed=s), _lognormal(60, seed=1000 + s), max_slowdown_pct=5).failed
        for s in range(100)
    ]
    assert sum(fails) == 0


def test_a_30_percent_slowdown_fails_a_10_percent_gate() -> None:
    # Steps spread ±30% (lognormal sigma 0.3): 400 steps a side pin each median to about ±3%.
    for s in range(20):
        # iid synthetic steps have no run-to-run spread to allow for: the within-run rule alone
        result = stats.compare_step_times(
            _lognormal(400, seed=s), _lognormal(400, 1.3, seed=500 + s), 10, run_to_run_pct=0
        )
        assert result.failed and result.significant and result.p_value < stats.ALPHA
        assert result.ratio.low > 1.10 and "slower beyond noise" in result.text


def test_too_few_steps_cannot_fail_a_tight_gate() -> None:
    """60 steps spread ±30% leave the ratio's interval about ±16% wide: a 30% slowdown against a
    10% gate is then not proven, and the gate says so instead of guessing."""
    results = [
        stats.compare_step_times(_lognormal(60, seed=s), _lognormal(60, 1.3, seed=500 + s), 10) for s in range(20)
    ]
    assert any(not r.failed and "within noise" in r.text for r in results)


def test_a_crossing_inside_the_noise_passes_and_says_so() -> None:
    # 6 steps a side, NEW 12% slower: above a 5% limit, but the interval reaches well below it.
    base = [0.0020, 0.0024, 0.0018, 0.0026, 0.0021, 0.0023]
    new = [v * 1.12 for v in base[::-1]]
    result = stats.compare_step_times(base, new, 5)
    assert result.change_pct > 5 and not result.failed
    assert "within noise (±" in result.text


def test_identical_runs_and_faster_runs_pass() -> None:
    x = _lognormal(100)
    same = stats.compare_step_times(x, x, 0)
    assert not same.failed and same.change_pct == 0 and same.p_value >= 0.5
    faster = stats.compare_step_times(x, [v * 0.5 for v in x], 0)
    assert not faster.failed and faster.change_pct == pytest.approx(-50)


def test_pooled_runs_count_run_to_run_spread() -> None:
    """Two runs a side whose medians differ by 15% between runs: pooled, the interval is wide enough
    that NEW, 10% slower than BASE's mean, does not fail a 5% gate; one run a side, without the
    run-to-run allowance, it would."""
    b1, b2 = _lognormal(200, 1.0, seed=1), _lognormal(200, 1.15, seed=2)
    n1, n2 = _lognormal(200, 1.17, seed=3), _lognormal(200, 1.27, seed=4)
    pooled = stats.compare_step_times([b1, b2], [n1, n2], 5)
    assert pooled.base_runs == 2 and pooled.base_steps == 400
    assert not pooled.failed
    assert stats.compare_step_times(b1, n2, 5, run_to_run_pct=0).failed


def test_compare_cost_for_10k_steps_stays_small() -> None:
    """Not a timing assertion: the work done must not scale with steps x resamples. A 10k-step
    bootstrap touches each step a handful of times, so it runs on a million steps without trouble."""
    x = _lognormal(1_000_000)
    ci = stats.median_interval(x)
    assert ci.low < ci.estimate < ci.high
