"""How sure a figure is: intervals for step times, shares and the slowdown between two runs.

Pure functions of lists of numbers (numpy, no scipy). Every random draw comes from a generator
seeded with ``SEED``, so a report re-rendered from the same record prints the same intervals.

Defaults, chosen once and used everywhere:
- ``CONFIDENCE`` = 0.95: two-sided intervals.
- ``RESAMPLES`` = 2000 bootstrap draws: the 2.5% and 97.5% percentiles then rest on 50 draws
  each, enough that the printed interval moves by well under its own width between seeds.
- Shares from the stack sampler: printed as a number only with at least ``MIN_SHARE_SAMPLES``
  samples in all and a Wilson interval half-width of at most ``MAX_SHARE_HALF_WIDTH`` (10
  percentage points). 3 samples of a 2 ms step can put one sample on a line and call it a third
  of the step; under this rule such a share is "too few to tell".
- A slowdown is significant when the one-sided Mann–Whitney p-value is below ``ALPHA`` (0.01)
  and the whole ratio-of-medians interval lies above the threshold (see ``compare_step_times``);
  that interval is a block bootstrap over time-ordered steps (runs first, with several), widened
  by ``RUN_TO_RUN_PCT`` when a side has one run.

The bootstrap of a median is simulated exactly without materialising resamples: drawing n
indices uniformly is drawing n uniforms U and taking ceil(n·U), a monotone map, so the resample's
m-th smallest value is the sorted data at ceil(n·U₍ₘ₎), and U₍ₘ₎ ~ Beta(m, n−m+1). One Beta draw per
resample replaces n index draws and a sort: 10k steps cost about a millisecond instead of ~0.5 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 17
MIN_SHARE_SAMPLES = 30
MAX_SHARE_HALF_WIDTH = 0.10
ALPHA = 0.01
# The compare gate's allowance for run-to-run spread when a side has a single run (percent): two
# runs of one unchanged job differ by more than either run's steps can show. Measured in docs/ci.md.
RUN_TO_RUN_PCT = 15.0
TOO_FEW_ADVICE = "run longer (more --steps or --seconds)"
# The doctor can also sample faster.
TOO_FEW_ADVICE_DOCTOR = "run longer (more --steps or --seconds) or raise --sample-hz"

# One run's step times (seconds), or several runs' (one list per run, pooled with run-level resampling).
RunSteps = Sequence[float] | np.ndarray
StepTimes = RunSteps | Sequence[RunSteps]


@dataclass(frozen=True)
class Interval:
    """A point estimate with its two-sided interval at ``confidence``; ``low <= estimate <= high``
    (unless every value is identical, when all three are equal)."""

    estimate: float
    low: float
    high: float
    confidence: float = CONFIDENCE

    @property
    def half_width_pct(self) -> float:
        """Half the interval's width as a percentage of the estimate (0 when the estimate is 0)."""
        if self.estimate == 0:
            return 0.0
        return (self.high - self.low) / 2.0 / abs(self.estimate) * 100.0

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _as_runs(steps: StepTimes) -> list[np.ndarray]:
    """One list of step times, or several runs' lists: always a list of non-empty float arrays."""
    if len(steps) and isinstance(steps[0], (Sequence, np.ndarray)):
        runs = [np.asarray(r, dtype=float) for r in steps]
    else:
        runs = [np.asarray(steps, dtype=float)]
    runs = [r for r in runs if r.size]
    if not runs:
        raise ValueError("no step times to summarise")
    return runs


def _order_stat_index(cum_weight: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Index of the value a uniform ``u`` maps to under the weighted empirical distribution."""
    return np.minimum(np.searchsorted(cum_weight, u, side="left"), cum_weight.size - 1)


def _medians_from_pool(
    values: np.ndarray, cum_weight: np.ndarray, n: int, rng: np.random.Generator, k: int
) -> np.ndarray:
    """``k`` bootstrap medians of ``n`` draws from sorted ``values`` with cumulative weights ``cum_weight``."""
    if n % 2:
        m = (n + 1) // 2
        one: np.ndarray = values[_order_stat_index(cum_weight, rng.beta(m, n - m + 1, k))]
        return one
    m = n // 2
    u1 = rng.beta(m, n - m + 1, k)
    # Given the m-th smallest uniform, the next one is the smallest of the n−m uniforms above it.
    u2 = u1 + (1.0 - u1) * rng.beta(1, n - m, k)
    two: np.ndarray = (values[_order_stat_index(cum_weight, u1)] + values[_order_stat_index(cum_weight, u2)]) / 2.0
    return two


def bootstrap_medians(
    steps: StepTimes, resamples: int = RESAMPLES, rng: np.random.Generator | None = None
) -> np.ndarray:
    """``resamples`` bootstrap replicates of the median of ``steps``.

    Several runs (a list of lists) are resampled in two levels, because steps of one run share its
    machine state and are not independent: runs are drawn with replacement first, then steps from
    the chosen runs' pooled steps. With one run this is the ordinary bootstrap of the median.
    """
    rng = rng if rng is not None else np.random.default_rng(SEED)
    runs = _as_runs(steps)
    if len(runs) == 1:
        values = np.sort(runs[0])
        cum = np.arange(1, values.size + 1) / values.size
        return _medians_from_pool(values, cum, values.size, rng, resamples)
    counts = rng.multinomial(len(runs), [1.0 / len(runs)] * len(runs), size=resamples)
    combos, which = np.unique(counts, axis=0, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    values = np.concatenate(runs)
    run_of = np.concatenate([np.full(r.size, i) for i, r in enumerate(runs)])
    order = np.argsort(values, kind="stable")
    values, run_of = values[order], run_of[order]
    out = np.empty(resamples)
    for c, combo in enumerate(combos):  # at most C(2R−1, R) distinct combos: 35 for 4 runs
        weights = combo[run_of].astype(float)
        n = int(weights.sum())
        picked = which == c
        out[picked] = _medians_from_pool(values, np.cumsum(weights) / n, n, rng, int(picked.sum()))
    return out


def block_length(n: int) -> int:
    """Consecutive steps per block of the within-run bootstrap: about sqrt(n), the usual rate for a
    block bootstrap of a weakly dependent series (long enough to carry a run's drift, short enough
    that a resample holds many blocks)."""
    return max(1, round(float(np.sqrt(n))))


def _block_resamples(run: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """``rows`` circular block-bootstrap resamples of the time-ordered ``run``, shape (rows, n).

    Each resample strings together blocks of ``block_length(n)`` consecutive steps from random
    starts (wrapping past the end, so every step is equally likely), cut to n. Steps that share a
    slow stretch of the machine stay together, so the spread of the resampled medians includes the
    run's drift instead of averaging it away as independent draws would.
    """
    n = run.size
    b = block_length(n)
    starts = rng.integers(0, n, size=(rows, -(-n // b)))
    idx = (starts[:, :, None] + np.arange(b)) % n
    drawn: np.ndarray = run[idx.reshape(rows, -1)[:, :n]]
    return drawn


# Elements of one chunk of resamples: bounds the memory of a bootstrap over long runs (~16 MB).
_CHUNK_VALUES = 2_000_000


def block_bootstrap_medians(
    steps: StepTimes, resamples: int = RESAMPLES, rng: np.random.Generator | None = None
) -> np.ndarray:
    """``resamples`` replicates of the pooled median of time-ordered step times, drift included.

    One run: the circular block bootstrap over its steps (``_block_resamples``). Several runs: two
    stages, because runs of one job differ by more than their steps suggest (the machine's load
    changes between runs): each replicate draws as many runs as there are, with replacement, then a
    block resample within each drawn run, and takes the median of the pool. Runs that disagree
    with one another widen the spread; one run cannot show that, see ``compare_step_times``.
    """
    rng = rng if rng is not None else np.random.default_rng(SEED)
    runs = _as_runs(steps)
    out = np.empty(resamples)
    longest = max(r.size for r in runs)
    chunk = max(1, _CHUNK_VALUES // (len(runs) * longest))
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        if len(runs) == 1:
            out[start : start + rows] = np.median(_block_resamples(runs[0], rows, rng), axis=1)
            continue
        picks = rng.integers(0, len(runs), size=(rows, len(runs)))
        pool = np.full((rows, len(runs), longest), np.nan)  # NaN pads runs shorter than the longest
        for slot in range(len(runs)):
            for r, run in enumerate(runs):
                chosen = picks[:, slot] == r
                if chosen.any():
                    pool[chosen, slot, : run.size] = _block_resamples(run, int(chosen.sum()), rng)
        out[start : start + rows] = np.nanmedian(pool.reshape(rows, -1), axis=1)
    return out


def block_median_interval(steps: StepTimes, confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> Interval:
    """The pooled median of the step times with its block-bootstrap interval (runs, then blocks)."""
    draws = block_bootstrap_medians(steps, resamples)
    estimate = float(np.median(np.concatenate(_as_runs(steps))))
    low, high = _percentiles(draws, confidence)
    return Interval(estimate, min(low, estimate), max(high, estimate), confidence)


def _percentiles(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [tail, 1.0 - tail])
    return float(low), float(high)


def median_interval(steps: StepTimes, confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> Interval:
    """The median of the step times (pooled over runs) with its bootstrap percentile interval."""
    draws = bootstrap_medians(steps, resamples)
    estimate = float(np.median(np.concatenate(_as_runs(steps))))
    low, high = _percentiles(draws, confidence)
    return Interval(estimate, min(low, estimate), max(high, estimate), confidence)


def steps_per_s_interval(steps: StepTimes, confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> Interval:
    """Steps per second as 1 / median step time; the interval is the median's, inverted."""
    med = median_interval(steps, confidence, resamples)
    if med.low <= 0:
        raise ValueError("step times must be positive")
    return Interval(1.0 / med.estimate, 1.0 / med.high, 1.0 / med.low, confidence)


def ratio_interval(parts: Sequence[float], totals: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """sum(parts) / sum(totals) over steps — a phase's share of step time — with its interval.

    The delta-method (linearised) standard error of a ratio estimator: se = sd(p_i - R·t_i) /
    (mean(t) · sqrt(n)). Closed form, so the doctor can give every phase its interval for free;
    it treats steps as independent, which understates drift within a run (see docs/doctor.md).
    """
    p, t = np.asarray(parts, dtype=float), np.asarray(totals, dtype=float)
    n = len(p)
    if n == 0 or t.sum() <= 0:
        return Interval(0.0, 0.0, 0.0, confidence)
    ratio = float(p.sum() / t.sum())
    if n < 2:
        return Interval(ratio, ratio, ratio, confidence)
    se = float(np.std(p - ratio * t, ddof=1) / (t.mean() * np.sqrt(n)))
    half = _z(confidence) * se
    return Interval(ratio, max(0.0, ratio - half), min(1.0, ratio + half), confidence)


# ---------------------------------------------------------------- shares from stack samples


def wilson_interval(successes: int, total: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval of a proportion: unlike the plain p ± z·se it stays inside [0, 1]
    and keeps its coverage for a handful of samples or a share near 0 or 1."""
    if total <= 0:
        return Interval(0.0, 0.0, 1.0, confidence)
    if not 0 <= successes <= total:
        raise ValueError(f"{successes} samples in a share of {total}")
    z = _z(confidence)
    p = successes / total
    denom = 1.0 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * np.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), confidence)


def share_is_reliable(samples_in_share: int, total_samples: int) -> bool:
    """Whether a share of ``samples_in_share`` out of ``total_samples`` stack samples may be printed
    as a number: at least ``MIN_SHARE_SAMPLES`` samples in all and a Wilson half-width of at most
    ``MAX_SHARE_HALF_WIDTH``. (A share of 0 out of 3000 is reliable: it rests on 3000 samples.)"""
    if total_samples < MIN_SHARE_SAMPLES:
        return False
    ci = wilson_interval(samples_in_share, total_samples)
    return (ci.high - ci.low) / 2.0 <= MAX_SHARE_HALF_WIDTH


def share_text(samples_in_share: int, total_samples: int, advice: str = TOO_FEW_ADVICE) -> str:
    """One line for a share from stack samples: '34% (±9 pt, 120 samples)' when reliable,
    '3 samples: too few to tell; run longer …' otherwise."""
    if not share_is_reliable(samples_in_share, total_samples):
        noun = "sample" if total_samples == 1 else "samples"
        return f"{total_samples} {noun}: too few to tell; {advice}"
    ci = wilson_interval(samples_in_share, total_samples)
    return f"{ci.estimate * 100:.0f}% (±{(ci.high - ci.low) / 2 * 100:.0f} pt, {total_samples} samples)"


def interval_text(ci: Interval, unit: str = "", digits: int = 1) -> str:
    """'1.80 ms (95% CI 1.71–1.93)' style text for any interval."""
    return (
        f"{ci.estimate:.{digits}f}{unit} ({ci.confidence * 100:.0f}% CI {ci.low:.{digits}f}–{ci.high:.{digits}f}{unit})"
    )


def step_time_text(steps: StepTimes) -> str:
    """One line for a report's step-time figures with their spread, e.g.
    'median step 1.80 ms (95% CI 1.71–1.93) · 555.6 steps/s (518.1–584.8)'."""
    med, rate = median_interval(steps), steps_per_s_interval(steps)
    return (
        f"median step {med.estimate * 1e3:.2f} ms ({med.confidence * 100:.0f}% CI "
        f"{med.low * 1e3:.2f}–{med.high * 1e3:.2f}) · {rate.estimate:.1f} steps/s ({rate.low:.1f}–{rate.high:.1f})"
    )


# ---------------------------------------------------------------- is NEW slower than BASE?


def mann_whitney_greater(new: RunSteps, base: RunSteps) -> float:
    """One-sided p-value of the Mann–Whitney U test that NEW's values tend to be larger than BASE's.

    Normal approximation with the tie correction of the variance and a 0.5 continuity correction;
    with tiny samples (under ~8 a side) it is approximate. Identical samples give p = 0.5 or 1.
    """
    x, y = np.asarray(new, dtype=float), np.asarray(base, dtype=float)
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        return 1.0
    both = np.concatenate([x, y])
    _, inverse, counts = np.unique(both, return_inverse=True, return_counts=True)
    # Mid-ranks: a value shared by t observations gets the mean of the t ranks it spans.
    first_rank = np.cumsum(counts) - counts + 1
    ranks = (first_rank + (counts - 1) / 2.0)[np.asarray(inverse).reshape(-1)]
    u = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    tie_term = float((counts**3 - counts).sum()) / (n * (n - 1))
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0:  # every value identical: no evidence either way
        return 0.5
    z = (u - n1 * n2 / 2.0 - 0.5) / np.sqrt(var)
    return float(1.0 - NormalDist().cdf(z))


@dataclass(frozen=True)
class SlowdownTest:
    """NEW against BASE: ratio of median step times (> 1 = NEW slower) with its block-bootstrap
    interval, the interval the gate decided on (``decision``: the ratio's, widened by
    ``allowance_pct`` when a side has one run), the one-sided Mann–Whitney p-value, and the gate's
    decision for ``threshold_pct``."""

    ratio: Interval
    decision: Interval
    allowance_pct: float  # run-to-run allowance folded into ``decision``; 0 with >= 2 runs a side
    p_value: float
    threshold_pct: float | None
    significant: bool  # the slowdown beyond the threshold (or beyond 0 without one) is real
    failed: bool  # a threshold was given, the median crossed it, and the crossing is significant
    base_steps: int
    new_steps: int
    base_runs: int
    new_runs: int
    text: str
    runs_note: str | None  # one line when a side has a single run: what the gate cannot know

    @property
    def change_pct(self) -> float:
        return (self.ratio.estimate - 1.0) * 100.0

    @property
    def noise_pct(self) -> float:
        return self.decision.half_width_pct


def ratio_of_medians_interval(
    new: StepTimes,
    base: StepTimes,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
) -> Interval:
    """median(NEW) / median(BASE), each side block-bootstrapped independently (runs drawn with
    replacement, then blocks of consecutive steps within each drawn run)."""
    rng = np.random.default_rng(SEED)
    new_draws = block_bootstrap_medians(new, resamples, rng)
    base_draws = block_bootstrap_medians(base, resamples, rng)
    base_med = float(np.median(np.concatenate(_as_runs(base))))
    if base_med <= 0 or np.any(base_draws <= 0):
        raise ValueError("BASE step times must be positive")
    estimate = float(np.median(np.concatenate(_as_runs(new)))) / base_med
    low, high = _percentiles(new_draws / base_draws, confidence)
    return Interval(estimate, min(low, estimate), max(high, estimate), confidence)


def _single_run_note(base_runs: int, new_runs: int, allowance_pct: float) -> str | None:
    if base_runs >= 2 and new_runs >= 2:
        return None
    sides = " and ".join(label for label, n in (("BASE", base_runs), ("NEW", new_runs)) if n < 2)
    return (
        f"one run on {sides}: run-to-run noise is not measured, so the gate allows ±{allowance_pct:g}% for it; "
        "give 2 or more runs a side (BASE... -- NEW...) to measure it"
    )


def compare_step_times(
    base: StepTimes,
    new: StepTimes,
    max_slowdown_pct: float | None = None,
    alpha: float = ALPHA,
    confidence: float = CONFIDENCE,
    run_to_run_pct: float = RUN_TO_RUN_PCT,
    what: str = "median step time",
) -> SlowdownTest:
    """Is NEW slower than BASE, beyond ``max_slowdown_pct``, and beyond the noise?

    The ratio of medians gets a block-bootstrap interval (``ratio_of_medians_interval``): drift
    inside each run widens it, and with two or more runs a side so does the spread between runs.
    With one run on a side that spread cannot be seen, so the decision interval is the ratio's
    widened by ``run_to_run_pct`` (low / (1 + a), high · (1 + a)), the run-to-run spread measured
    for the planted job in docs/ci.md. The gate fails only when all three hold: the ratio is above
    1 + threshold; the lower end of the decision interval is too; and the one-sided Mann–Whitney
    p-value over the pooled steps is below ``alpha``. A crossing that misses either condition is
    reported as "within noise (±x%)" and passes.
    """
    base_runs, new_runs = _as_runs(base), _as_runs(new)
    ratio = ratio_of_medians_interval(new_runs, base_runs, confidence)
    note = _single_run_note(len(base_runs), len(new_runs), run_to_run_pct)
    allowance = 0.0 if note is None else run_to_run_pct
    widen = 1.0 + allowance / 100.0
    decision = Interval(ratio.estimate, ratio.low / widen, ratio.high * widen, confidence)
    p = mann_whitney_greater(np.concatenate(new_runs), np.concatenate(base_runs))
    limit = 1.0 + (max_slowdown_pct or 0.0) / 100.0
    significant = p < alpha and decision.low > limit
    crossed = max_slowdown_pct is not None and ratio.estimate > limit
    failed = crossed and significant
    change = (ratio.estimate - 1.0) * 100.0
    noise = f"±{decision.half_width_pct:.1f}%" + (f" with ±{allowance:g}% between runs" if allowance else "")
    limit_text = "" if max_slowdown_pct is None else f" (limit +{max_slowdown_pct:g}%)"
    if failed:
        verdict = f"slower beyond noise: {decision.low * 100 - 100:+.1f}% at least, p={p:.2g}"
    elif crossed:
        verdict = f"within noise ({noise})"
    else:
        verdict = f"noise {noise}"
    text = f"{what} {change:+.1f}% vs BASE{limit_text}; {verdict}"
    return SlowdownTest(
        ratio=ratio,
        decision=decision,
        allowance_pct=allowance,
        p_value=p,
        threshold_pct=max_slowdown_pct,
        significant=significant,
        failed=failed,
        base_steps=int(sum(r.size for r in base_runs)),
        new_steps=int(sum(r.size for r in new_runs)),
        base_runs=len(base_runs),
        new_runs=len(new_runs),
        text=text,
        runs_note=note,
    )
