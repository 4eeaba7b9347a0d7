"""The one-screen summary on hand-built cases: the one fix follows the trial, fits 30 lines at 100
columns, and the full account stays behind ``details``."""

from __future__ import annotations

import io
import math
import os

import pytest
from handmade import record
from rich.console import Console

from supplyline.analyze.next_step import loader_changes, next_step, run_command, spec_text
from supplyline.analyze.report import build_report
from supplyline.collect.events import TrialRecord, TrialsInfo
from supplyline.record import TargetInfo, load_record
from supplyline.render.console import render_summary

HERE = os.path.dirname(__file__)
DEMO_RECORD = os.path.join(HERE, "fixtures", "record_v1_demo.json")  # the bundled demo, num_workers=0


def screen(report, out_dir: str | None = "/tmp/run/r", details: bool = False) -> list[str]:
    buf = io.StringIO()
    render_summary(report, out_dir, Console(file=buf, width=100, color_system=None), details=details)
    return buf.getvalue().splitlines()


def height(lines: list[str]) -> int:
    return sum(max(1, math.ceil(len(line) / 100)) for line in lines)


def demo_with_trial(measured: float, spread: list[float], shards: int | None = None):
    rec = load_record(DEMO_RECORD)
    for loader in rec.loaders:
        loader.dataset_shards = shards
    rec.trials = TrialsInfo(
        True,
        40,
        "",
        [
            TrialRecord(
                "dataloader",
                {"num_workers": 3, "prefetch_factor": 4, "persistent_workers": True},
                2.0,
                40.0,
                40 * measured,
                measured,
                spread,
                40,
            )
        ],
    )
    return build_report(rec)


def test_a_faster_trial_is_the_change_the_command_and_the_gain() -> None:
    report = demo_with_trial(1.48, [1.3, 1.6])
    step = next_step(report, "/tmp/run/r")
    assert step is not None and step.check == "dataloader"
    assert step.change[-1] == "+ DataLoader(..., num_workers=3, prefetch_factor=4, persistent_workers=True)"
    assert step.change[0].startswith("- DataLoader(..., num_workers=0")
    assert "--apply auto --from" in step.command
    assert step.gain.startswith("measured 1.48× (95% interval 1.30–1.60×) in a 40-step trial")
    assert "faster" in step.gain and "the model predicted" in step.gain
    lines = screen(report)
    assert height(lines) <= 30, "\n".join(lines)
    text = "\n".join(lines)
    assert "Gain: measured 1.48×" in text and "What-if" not in text and "Time outside the hooks" not in text


@pytest.mark.parametrize("measured, spread", [(1.05, [0.9, 1.2]), (0.88, [0.84, 0.93])])
def test_a_trial_that_is_not_faster_makes_cheaper_samples_the_fix(measured, spread) -> None:
    report = demo_with_trial(measured, spread)
    step = next_step(report)
    assert step is not None
    assert step.do.startswith("Not more workers") and "Make each sample cheaper" not in step.do[:20]
    assert "cheaper" in step.do and not any(line.startswith("+") for line in step.change)
    assert "--apply auto" not in step.command
    text = "\n".join(screen(report))
    assert "slower than unchanged: do not apply it" in text if measured < 1 else "no clear difference" in text


@pytest.mark.parametrize("shards, named", [(3, True), (2, True), (64, False)])
def test_the_shards_are_named_only_where_they_capped_the_trial(shards: int, named: bool) -> None:
    # the trial tried 3 workers and measured no gain: 3 or fewer shards were the cap, 64 were not
    step = next_step(demo_with_trial(1.0, [0.9, 1.1], shards))
    assert step is not None and step.do.startswith("Not more workers")
    assert ("shard(s)" in step.do) is named, step.do


def test_without_a_trial_the_command_applies_the_recommended_settings() -> None:
    report = build_report(load_record(DEMO_RECORD))
    step = next_step(report)
    assert step is not None and "(no trial measured it)" in step.gain
    changes = loader_changes(report.dataloader_recommended)
    assert changes["num_workers"] >= 1
    assert f"--apply {spec_text(changes)}" in step.command
    assert f"+ DataLoader(..., num_workers={changes['num_workers']}" in step.change[-1]


def test_run_command_quotes_the_job_as_it_ran() -> None:
    script = TargetInfo("script", "/work/job/train.py", ["--lr", "1e-3", "a b"], "/work/job")
    assert run_command(script, "async_logging") == "supplyline run --apply async_logging train.py --lr 1e-3 'a b'"
    module = TargetInfo("module", "pkg.train", [], "/work")
    assert run_command(module, "auto", "/work/r") == "supplyline run --apply auto --from r -m pkg.train"
    assert run_command(TargetInfo("library", "notebook", [], "/"), "async_save") == ""
    assert spec_text({"num_workers": 2, "persistent_workers": True, "pin_memory": False}) == (
        "num_workers=2,persistent_workers,pin_memory=false"
    )


def test_a_logging_bound_job_gets_its_switch_and_details_keep_the_full_account() -> None:
    rec = record(steps=40, step_s=0.010, logging=0.006, compute_hooked=0.003)
    report = build_report(rec)
    step = next_step(report)
    assert step is not None and step.check == "logging"
    assert step.command.startswith("supplyline run --apply async_logging ")
    short, full = screen(report), screen(report, details=True)
    assert height(short) <= 30 and len(full) > len(short)
    assert any(line.startswith("Step time") for line in full) and not any(
        line.startswith("Step time") for line in short
    )


def test_no_finding_says_so_and_prints_no_fix() -> None:
    rec = record(steps=40, step_s=0.010, compute_hooked=0.0095)
    report = build_report(rec)
    assert next_step(report) is None
    text = "\n".join(screen(report))
    assert "Fix (" not in text and report.no_findings_sentence.split(":")[0] in text


def test_the_step_time_beside_the_rate_is_the_mean_when_long_steps_carry_the_time() -> None:
    from supplyline.analyze.report import StepStats
    from supplyline.render.console import step_words

    # 3.3 ms median, 17 ms mean: 58.7 steps/s is the mean's rate, so the mean is the figure quoted
    skewed = StepStats(60, 1, 3.3, 17.0, 90.0, 58.7, None, 1.0, [3.1, 3.6])
    assert step_words(skewed, " (95% CI 3.1–3.6)") == "17.0 ms mean, median 3.3 ms (95% CI 3.1–3.6)"
    even = StepStats(60, 1, 10.0, 10.5, 12.0, 95.0, None, 1.0, None)
    assert step_words(even, "") == "10.0 ms"
