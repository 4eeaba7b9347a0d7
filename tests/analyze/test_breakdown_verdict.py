"""The breakdown's arithmetic and every branch of the verdict, on hand-built records."""

from __future__ import annotations

import pytest
from handmade import line, record

from supplyline import phases as P
from supplyline.analyze.breakdown import breakdown
from supplyline.analyze.checks import Finding
from supplyline.analyze.verdict import verdict


def test_shares_add_up_and_the_first_step_is_warm_up() -> None:
    b = breakdown(record(steps=20, data_wait=0.004, logging=0.001))
    assert b.steps == 19 and b.warmup_steps_excluded == 1
    assert sum(b.phase_share.values()) == pytest.approx(1.0)
    assert b.phase_share[P.DATA_WAIT] == pytest.approx(0.4) and b.phase_ms_per_step[P.LOGGING] == pytest.approx(1.0)
    assert list(b.phase_share) == list(P.PHASE_ORDER)
    assert breakdown(record(steps=4)).warmup_steps_excluded == 0


def test_unhooked_time_is_split_by_the_stack_samples(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("a = slow()\nprint(a)\n")
    samples = [line("unhooked", "torch", "/t/nn.py", 1, 2), line("unhooked", "user", str(src), 1, 1)]
    samples.append(line("unhooked", "user", str(src), 2, 1))
    b = breakdown(record(step_s=0.010, data_wait=0.002, compute_hooked=0.004, line_samples=samples))
    # 4 ms unhooked: half compute (torch), a quarter logging (print line), a quarter other.
    assert b.phase_ms_per_step[P.COMPUTE] == pytest.approx(6.0)
    assert b.phase_ms_per_step[P.LOGGING] == pytest.approx(1.0)
    assert b.phase_ms_per_step[P.OTHER] == pytest.approx(1.0)
    assert [(x.line, x.phase) for x in b.top_lines] == [(1, P.OTHER), (2, P.LOGGING)]


def test_verdicts() -> None:
    none = breakdown(record(steps=0))
    assert verdict(none, []).bound == "unknown" and "No training steps" in verdict(none, []).sentence
    b = breakdown(record(data_wait=0.006))
    f = Finding("dataloader", "high", 0.6, "e", "x", 2.5)
    v = verdict(b, [f])
    assert v.bound == "input"
    assert (
        v.sentence
        == "Input-bound: 60% of each training step is spent waiting for the DataLoader; fixing it should give about 2.5× (dataloader)."
    )
    assert verdict(breakdown(record(checkpoint=0.003)), []).bound == "checkpoint"
    assert verdict(breakdown(record(data_wait=0.001)), []).sentence.startswith(
        "Compute-bound: the supply line keeps up"
    )


def test_other_dominant_is_unknown_with_its_line(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("busy_python()\n")
    b = breakdown(record(compute_hooked=0.001, line_samples=[line("unhooked", "user", str(src), 1, 40)]))
    v = verdict(b, [])
    assert v.bound == "unknown" and "train.py:1 `busy_python()`" in v.sentence


def test_a_split_from_three_samples_is_not_a_verdict(tmp_path) -> None:
    """60 steps of 2 ms give a 25 Hz sampler ~3 samples: one on the user's line must not become 'other 90%'."""
    src = tmp_path / "train.py"
    src.write_text("busy_python()\n")
    b = breakdown(
        record(steps=60, step_s=0.002, compute_hooked=0.0002, line_samples=[line("unhooked", "user", str(src), 1, 3)])
    )
    assert not b.split_reliable and b.unhooked_samples == 3
    assert b.share_ci[P.OTHER].low == 0.0  # the sampled share may truly be none of it
    assert verdict(b, []).bound == "compute"
    (top,) = b.top_lines
    assert not top.reliable and top.samples == 3
