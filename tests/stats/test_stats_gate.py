"""The compare gate on real doctor runs: the same planted job never fails against itself; the job
made 40% slower (a longer planted sleep per batch) always does, one run a side and pooled.

The planted step is a 30 ms sleep plus a tiny model step. On our shared 2-core machine a thread
woken from a sleep waits 0-4 ms for a core, so single steps vary by ~10%; the slowed job sleeps
42 ms, 40% more (the issue's figure: beyond the 10% limit and the 15% run-to-run allowance one run a
side carries).
"""

from __future__ import annotations

import itertools
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reports"))
from reports_helpers import supplyline  # the CLI runner shared with the report tests

pytestmark = pytest.mark.slow

JOB = os.path.join(os.path.dirname(__file__), "zoo", "steady.py")
LIMIT = "10"  # --max-slowdown: a 40% planted slowdown is well beyond it, run-to-run drift well within


def _doctor(out: str, sleep_ms: str) -> str:
    proc = supplyline(["doctor", "--quiet", "--no-what-if", "--no-try", "--steps", "40", "--out", out, JOB, sleep_ms])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("gate")
    same = [_doctor(str(root / f"same{i}"), "30") for i in range(4)]  # 12 ordered pairs
    slow = [_doctor(str(root / f"slow{i}"), "42") for i in range(2)]
    return {"same": same, "slow": slow}


def _compare(base: str, new: str, *extra: str) -> tuple[int, dict]:
    proc = supplyline(["compare", base, new, "--max-slowdown", LIMIT, "--json", *extra])
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_the_same_job_never_fails_against_itself(runs: dict[str, list[str]]) -> None:
    for base, new in itertools.permutations(runs["same"], 2):  # 12 ordered pairs
        rc, result = _compare(base, new)
        assert rc == 0 and not result["gates"][0]["failed"], result["gates"][0]["text"]


def test_the_job_made_40_percent_slower_always_fails(runs: dict[str, list[str]]) -> None:
    for base, new in itertools.product(runs["same"], runs["slow"]):
        rc, result = _compare(base, new)
        gate = result["gates"][0]
        assert rc == 1 and gate["failed"] and gate["significant"], gate["text"]
        assert result["slowdown"]["p_value"] < result["slowdown"]["alpha"]


def test_pooled_runs_pass_the_same_and_fail_the_slower(runs: dict[str, list[str]]) -> None:
    same = runs["same"]
    rc, result = _compare(same[0], same[2], "--base-runs", same[1], "--new-runs", same[3])
    assert rc == 0 and (result["slowdown"]["base_runs"], result["slowdown"]["new_runs"]) == (2, 2)
    glob = os.path.join(os.path.dirname(same[0]), "same*")
    rc, result = _compare(glob, runs["slow"][0], "--new-runs", runs["slow"][1])
    assert rc == 1 and result["slowdown"]["base_runs"] == 4 and result["slowdown"]["base_steps"] == 4 * 39


def test_the_text_output_names_the_noise(runs: dict[str, list[str]]) -> None:
    proc = supplyline(["compare", runs["same"][0], runs["same"][1], "--max-slowdown", LIMIT])
    assert "95% CI" in proc.stdout and "Mann-Whitney" in proc.stdout
    assert proc.returncode == 0 and "noise ±" in proc.stdout and "FAIL" not in proc.stdout
