"""Every sentence the report prints is true for its case: hand-built records for each misleading one."""

from __future__ import annotations

import io

import pytest
from handmade import OutcomeInfo, WhatIfInfo, loader, record, sample
from rich.console import Console

from supplyline import phases as P
from supplyline.analyze.breakdown import breakdown
from supplyline.analyze.report import build_report
from supplyline.analyze.verdict import verdict
from supplyline.render.console import render_summary
from supplyline.render.html import build_html


def console_text(rec) -> str:
    buf = io.StringIO()
    render_summary(build_report(rec), None, Console(file=buf, width=2000, color_system=None), details=True)
    return buf.getvalue()


def whatif(replay_step_s: float) -> WhatIfInfo:
    return WhatIfInfo(True, True, "", 10, 10, replay_step_s, 10, 500.0)


def noisy(n: int = 20, lo: float = 0.009, hi: float = 0.011) -> list[float]:
    return [lo + (hi - lo) * (k % 5) / 4 for k in range(n)]


def test_one_observed_rate_on_the_screen_and_in_report_json() -> None:
    rec = record(
        steps=20, durations=noisy(), data_wait=0.004, compute_hooked=0.004, whatif=whatif(0.004), whatif_steps=10
    )
    rep = build_report(rec)
    assert rep.whatif.observed_steps_per_s == rep.steps.steps_per_s
    text = console_text(rec)
    rate = f"{rep.steps.steps_per_s:.1f}"
    assert f"{rate} steps/s" in text and f"observed {rate} steps/s" in text
    assert "at most 2.51× faster without the input side (observed steps 9.0–11.0 ms" in text


def test_no_whatif_claim_within_the_runs_own_noise() -> None:
    # a replay at 9.5 ms among observed steps of 9-11 ms: nothing to claim
    rep = build_report(record(steps=20, durations=noisy(), data_wait=0.004, whatif=whatif(0.0095), whatif_steps=10))
    assert rep.whatif.consumer_bound_speedup is None
    assert "within the observed steps 9.0–11.0 ms" in rep.whatif.claim and "at most" not in rep.whatif.claim
    assert rep.whatif.observed_step_ms_spread == pytest.approx([9.0, 11.0])


def test_never_a_speed_up_below_one() -> None:
    rep = build_report(record(steps=20, durations=noisy(), data_wait=0.004, whatif=whatif(0.0108), whatif_steps=10))
    assert rep.whatif.consumer_bound_speedup is None and "0.9" not in rep.whatif.claim
    assert "×" not in console_text(record(steps=20, durations=noisy(), whatif=whatif(0.0108), whatif_steps=10))


def test_a_faster_replay_at_one_percent_data_wait_is_not_the_input_side() -> None:
    rec = record(steps=20, durations=noisy(), data_wait=0.0001, whatif=whatif(0.007), whatif_steps=10)
    rep = build_report(rec)
    assert rep.whatif.consumer_bound_speedup is None
    assert "waits on data 1% of its time" in rep.whatif.claim and "not because of the input" in rep.whatif.claim


def test_no_stall_word_without_a_stall() -> None:
    idle = [sample(1000.0 + k * 0.05, worker_cpu=[5.0, 5.0]) for k in range(4)]
    rec = record(data_wait=0.0001, loaders=[loader(num_workers=2)], monitor=idle)
    rep = build_report(rec)
    assert rep.dataloader is not None and rep.dataloader.stall == "none"
    assert "stall:" not in build_html(rep, rec)
    waiting = build_report(record(data_wait=0.005, loaders=[loader(num_workers=2)], monitor=idle))
    assert waiting.dataloader is not None and waiting.dataloader.stall == "fetch"


def test_a_crash_before_any_step_never_says_the_supply_line_keeps_up() -> None:
    crashed = OutcomeInfo(1, "exception", None, "RuntimeError", "boom", "Traceback ...", 0.5)
    rec = record(steps=0, outcome=crashed)
    text = console_text(rec)
    assert "keeps up" not in text
    assert "no training step was observed (the job crashed before its first step)" in text
    assert "keeps up" not in build_html(build_report(rec), rec)


def test_no_dataloader_wait_quoted_for_a_job_without_a_dataloader() -> None:
    v = build_report(record(loaders=[])).verdict
    assert v.bound == P.COMPUTE and "DataLoader" not in v.sentence
    assert "the DataLoader wait is 0%" in build_report(record()).verdict.sentence


def test_in_loop_evaluation_is_its_own_phase_not_the_models_work() -> None:
    b = breakdown(record(step_s=0.010, evaluating=0.002, loaders=[]))
    assert b.phase_share[P.EVAL] == pytest.approx(0.2) and b.phase_share[P.COMPUTE] == pytest.approx(0.8)
    v = verdict(b, [], loader_seen=False)
    assert v.sentence == (
        "Compute-bound: the supply line keeps up — 80% of step time is the model's own work, "
        "20% is evaluating inside the training loop."
    )
    mostly_eval = breakdown(record(step_s=0.010, evaluating=0.006, loaders=[]))
    v = verdict(mostly_eval, [], loader_seen=False)
    assert v.sentence.startswith("60% of each training step is spent evaluating inside the training loop")
    assert "the model's own training work is 40%" in v.sentence


def test_eval_is_never_blamed_as_a_supply_side() -> None:
    assert P.EVAL in P.CLOCK_PHASES and P.EVAL not in {p.name for p in P.SUPPLY_SIDE}
    assert P.BY_NAME[P.EVAL].bound is None


def test_a_record_without_the_eval_column_still_analyses() -> None:
    rec = record(step_s=0.010)
    del rec.steps["eval_s"]
    assert breakdown(rec).phase_share[P.EVAL] == 0.0


def test_the_report_says_the_replay_steps_are_real_updates() -> None:
    rep = build_report(record(steps=20, durations=noisy(), data_wait=0.004, whatif=whatif(0.004), whatif_steps=10))
    assert "real optimizer updates" in rep.whatif.label
    assert any("may have logged them as training batches" in n for n in rep.notes)


def test_input_bound_never_sits_beside_keeps_up() -> None:
    # The steps wait on data, but no loader the doctor knows was seen: no finding can name a knob.
    rec = record(data_wait=0.008, loaders=[])
    rep = build_report(rec)
    assert rep.verdict.bound == "input" and not rep.findings
    assert "keeps up" not in rep.no_findings_sentence and "keeps up" not in console_text(rec)
    healthy = build_report(record())
    assert not healthy.findings and "keeps up" in healthy.no_findings_sentence


def test_a_wait_at_the_edge_of_input_bound_does_not_flip_the_verdict_by_its_point() -> None:
    # the same job twice under a changing load: 19.5% and 20.1% of each step waiting for data
    below = breakdown(record(step_s=0.010, data_wait=0.00195))
    above = breakdown(record(step_s=0.010, data_wait=0.00201))
    for decision in ("slower", "no difference", None):
        verdicts = [verdict(b, [], trial_decision=decision) for b in (below, above)]
        assert [v.bound for v in verdicts] == [P.COMPUTE, P.COMPUTE], verdicts
        assert all("at the edge of input-bound" in v.sentence for v in verdicts), verdicts
    said = verdict(above, [], trial_decision="slower").sentence
    assert "the DataLoader wait is 20% (18–22%), at the edge of input-bound: its fix measured slower" in said
    # a trial that measured the fix faster decides it: input-bound, on both sides of the point
    assert [verdict(b, [], trial_decision="faster").bound for b in (below, above)] == ["input", "input"]
    # far from the edge the share decides, whatever the trial said
    assert verdict(breakdown(record(step_s=0.010, data_wait=0.004)), [], trial_decision="slower").bound == "input"
    assert verdict(breakdown(record(step_s=0.010, data_wait=0.001)), [], trial_decision="faster").bound == P.COMPUTE


def test_a_gil_bound_loader_decides_a_wait_at_the_edge_without_a_trial() -> None:
    # A thread worker holding the GIL stretches the training thread's own time: the wait understates.
    edge = breakdown(record(step_s=0.010, data_wait=0.00195))
    v = verdict(edge, [], gil_bound=True)
    assert v.bound == "input" and "hold the GIL the training thread needs" in v.sentence, v
    # a trial's answer still decides over the GIL rule, and far from the edge the share does
    assert verdict(edge, [], trial_decision="slower", gil_bound=True).bound == P.COMPUTE
    low = breakdown(record(step_s=0.010, data_wait=0.0005))
    assert verdict(low, [], gil_bound=True).bound == P.COMPUTE
