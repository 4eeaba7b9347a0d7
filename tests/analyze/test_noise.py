"""Figures with their noise, on hand-built records: intervals, too-few-samples shares, findings below
their own noise, the spread of a gain."""

from __future__ import annotations

import io

from handmade import line, record
from rich.console import Console

from supplyline import phases as P
from supplyline.analyze.report import build_report
from supplyline.render.console import render_summary


def _summary(rec) -> str:
    buffer = io.StringIO()
    render_summary(build_report(rec), None, Console(file=buffer, width=200, highlight=False), details=True)
    return buffer.getvalue()


def test_three_samples_never_print_a_line_share_as_a_number(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("x = forward(batch)\n")
    rec = record(steps=60, step_s=0.002, compute_hooked=0.0002, line_samples=[line("unhooked", "user", str(src), 1, 3)])
    report = build_report(rec)
    (top,) = report.top_lines
    assert top.samples == 3 and not top.reliable
    assert not report.sampling.split_reliable and "3 samples: too few to tell" in (report.sampling.note or "")
    text = _summary(rec)
    assert "3 samples: too few to tell; run longer (more --steps or --seconds) or raise --sample-hz" in text
    assert "100.0%  train.py:1" not in text and "?   train.py:1" in text
    assert report.verdict.bound == "compute"  # not "90% of step time is in your own code"


def test_enough_samples_print_the_share(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("x = forward(batch)\n")
    rec = record(
        steps=60, step_s=0.002, compute_hooked=0.0002, line_samples=[line("unhooked", "user", str(src), 1, 300)]
    )
    report = build_report(rec)
    assert report.sampling.split_reliable and report.sampling.note is None
    assert "100.0%  train.py:1" in _summary(rec)


def test_the_median_step_has_its_interval() -> None:
    durations = [0.010 + 0.001 * ((k * 7) % 5) for k in range(40)]
    report = build_report(record(steps=40, durations=durations))
    low, high = report.steps.step_ms_median_ci or (0.0, 0.0)
    assert low <= report.steps.step_ms_median <= high and high - low < 3.0
    assert "(95% CI" in _summary(record(steps=40, durations=durations))


def _with_noisy_logging(rec, per_step: list[float]):
    """Give each observed step its own logging time (the rest stays hooked compute)."""
    st = rec.steps
    for i, value in enumerate(per_step):
        st["compute_hooked_s"][i] += st["logging_s"][i] - value
        st["logging_s"][i] = value
    return rec


def test_a_finding_below_its_own_noise_is_not_raised() -> None:
    # Logging averages 6% of the step but swings 0-24% step to step: its interval reaches below 5%.
    noisy = [0.0024 if k % 4 == 0 else 0.0 for k in range(20)]
    rec = _with_noisy_logging(record(steps=20, logging=0.0006), noisy)
    report = build_report(rec)
    assert report.phase_share[P.LOGGING] > 0.05 and report.phase_share_ci[P.LOGGING][0] < 0.05
    assert "logging" not in [f.check for f in report.findings]


def test_a_steady_share_above_the_floor_is_raised_with_its_gain_spread() -> None:
    report = build_report(record(steps=20, logging=0.0006))  # 6% every step
    (f,) = [f for f in report.findings if f.check == "logging"]
    assert f.expected_speedup_range is not None
    assert f.expected_speedup_range[0] <= (f.expected_speedup or 0) <= f.expected_speedup_range[1]
    assert not f.spread_is_wide and f.gain_text() == f"{f.expected_speedup:.1f}×"


def test_a_wide_gain_spread_is_stated() -> None:
    wide = [0.006 if k % 2 else 0.002 for k in range(20)]  # 20-60% of the step in logging
    report = build_report(_with_noisy_logging(record(steps=20, logging=0.004), wide))
    (f,) = [f for f in report.findings if f.check == "logging"]
    assert f.spread_is_wide
    assert f"({f.expected_speedup_range[0]:.1f}–{f.expected_speedup_range[1]:.1f}×)" in report.verdict.sentence
