"""Non-finite and absurd numbers are refused wherever a command reads one: one line, exit 2,
nothing started and nothing written. (NaN compares False with everything, so a plain
``if x <= 0`` check lets it through: a NaN budget never runs out, a NaN threshold never fails.)"""

from __future__ import annotations

import os

import pytest
from faults_helpers import assert_one_line, supplyline

from supplyline.errors import UserError

CASES = [
    (["tune", "x:y", "--budget", "nan"], "--budget", "not a finite number"),
    (["tune", "x:y", "--budget", "inf"], "--budget", "not a finite number"),
    (["tune", "x:y", "--consumer-ms", "nan"], "--consumer-ms", "not a finite number"),
    (["tune", "x:y", "--max-memory", "inf"], "--max-memory", "not a finite number"),
    (["monitor", "--interval", "inf"], "--interval", "not a finite number"),
    (["monitor", "--interval", "1e10"], "--interval", "at most 86400"),
    (["monitor", "--interval", "nan"], "--interval", "not a finite number"),
    (["monitor", "--duration", "inf"], "--duration", "not a finite number"),
    (["disk", ".", "--seconds", "nan"], "--seconds", "not a finite number"),
    (["stage", ".", "--margin", "nan"], "--margin", "not a finite number"),
    (["preprocess", "x:y", "--samples", "nan"], "--samples", "not a whole number"),
    (["doctor", "--seconds", "nan", "train.py"], "--seconds", "not a finite number"),
    (["doctor", "--seconds", "inf", "train.py"], "--seconds", "not a finite number"),
    (["doctor", "--steps", "abc", "train.py"], "--steps", "not a whole number"),
    (["compare", "a", "b", "--max-slowdown", "nan"], "--max-slowdown", "not a finite number"),
    (["compare", "a", "b", "--max-slowdown", "inf"], "--max-slowdown", "not a finite number"),
    (["compare", "a", "b", "--max-data-wait", "nan"], "--max-data-wait", "not a finite number"),
]


@pytest.mark.parametrize("args, option, reason", CASES, ids=[" ".join(c[0][:1] + c[0][-2:]) for c in CASES])
def test_non_finite_numbers_are_one_line(tmp_path, args, option, reason):
    done = supplyline(args, cwd=str(tmp_path))
    line = assert_one_line(done, 2, option, reason)
    assert line.startswith(f"supplyline {args[0]}: ")
    assert os.listdir(tmp_path) == []  # nothing started, nothing written


def test_monitor_interval_inf_writes_no_log(tmp_path):
    log = tmp_path / "samples.jsonl"
    done = supplyline(["monitor", "--interval", "inf", "--log", str(log), "--duration", "1"])
    assert_one_line(done, 2, "--interval")
    assert not log.exists()


@pytest.mark.parametrize("interval", [float("inf"), float("nan"), 1e10, 0.0])
def test_library_monitor_refuses_intervals_its_thread_cannot_wait(interval):
    from supplyline.collect.sampler import Monitor

    with pytest.raises(UserError, match="interval must be more than 0"):
        Monitor(interval=interval)
