"""`supplyline report` re-renders a saved run; `supplyline compare` gates on regressions; bad input is one line, exit 2."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from reports_helpers import supplyline

pytestmark = pytest.mark.slow  # every test runs the CLI in child processes


def _one_line_error(proc, command: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"supplyline {command}: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_report_without_flags_prints_the_summary(base_run: str) -> None:
    proc = supplyline(["report", base_run])
    assert proc.returncode == 0, proc.stderr
    assert "Verdict:" in proc.stderr and "Step " in proc.stderr and "Step time" not in proc.stderr
    assert f"supplyline report {base_run} --details" in proc.stderr  # where the rest is
    full = supplyline(["report", base_run, "--details"])
    assert full.returncode == 0 and "Step time" in full.stderr and "What-if" in full.stderr, full.stderr


def test_report_rewrites_the_chosen_files(tmp_path, base_run: str) -> None:
    run = str(tmp_path / "copy")
    shutil.copytree(base_run, run)
    for name in ("report.html", "report.json", "trace.json"):
        os.unlink(os.path.join(run, name))
    proc = supplyline(["report", run, "--html", "--trace"])
    assert proc.returncode == 0, proc.stderr
    assert os.path.exists(os.path.join(run, "report.html")) and os.path.exists(os.path.join(run, "trace.json"))
    assert not os.path.exists(os.path.join(run, "report.json"))  # only what was asked for
    out = str(tmp_path / "elsewhere")
    proc = supplyline(["report", os.path.join(run, "record.json"), "--json", "--out", out])
    assert proc.returncode == 0, proc.stderr
    rerendered = json.load(open(os.path.join(out, "report.json")))
    original = json.load(open(os.path.join(base_run, "report.json")))
    assert rerendered["steps"] == original["steps"] and rerendered["verdict"] == original["verdict"]


@pytest.mark.parametrize(
    "case", ["missing_dir", "no_record", "corrupt", "schema", "malformed", "not_object", "inconsistent"]
)
def test_bad_input_is_one_line_exit_2(tmp_path, base_run: str, case: str) -> None:
    d = tmp_path / "run"
    record = json.load(open(os.path.join(base_run, "record.json")))
    if case != "missing_dir":
        d.mkdir()
    body = {
        "corrupt": '{"schema_version": 1, "tar',
        "schema": json.dumps({**record, "schema_version": 99}),
        "malformed": json.dumps({**record, "target": 5}),
        "not_object": "[1, 2]",
        "inconsistent": json.dumps({**record, "steps": {"whatif": [0.0] * 6}}),
    }.get(case)
    if body is not None:
        (d / "record.json").write_text(body)
    line = _one_line_error(supplyline(["report", str(d), "--html"]), "report")
    assert {
        "missing_dir": "no run record",
        "no_record": "no run record",
        "corrupt": "is not a supplyline run record (not valid JSON",
        "schema": "schema version 99",
        "malformed": "'target' is malformed",
        "not_object": "not a supplyline run record",
        "inconsistent": "record field 'steps.duration_s' is missing",
    }[case] in line
    assert not (d / "report.html").exists()
    _one_line_error(supplyline(["compare", base_run, str(d)]), "compare")


def test_compare_flags_a_planted_regression(base_run: str, slow_run: str) -> None:
    proc = supplyline(["compare", base_run, slow_run, "--max-slowdown", "20", "--json"])
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    gate = result["gates"][0]
    assert gate["gate"] == "max_slowdown" and gate["failed"] and gate["value_pct"] > 20
    assert result["metrics"]["step_ms_median"]["new"] > result["metrics"]["step_ms_median"]["base"]
    assert result["phase_share"]["data_wait"]["change_points"] > 0
    text = supplyline(["compare", base_run, slow_run, "--max-data-wait", "1"])
    assert text.returncode == 1 and "FAIL" in text.stdout and "data wait" in text.stdout


def test_compare_passes_when_within_thresholds(base_run: str, slow_run: str) -> None:
    same = supplyline(["compare", base_run, base_run, "--max-slowdown", "0", "--max-data-wait", "100"])
    assert same.returncode == 0, same.stdout + same.stderr
    faster = supplyline(["compare", slow_run, base_run, "--max-slowdown", "5", "--json"])
    assert faster.returncode == 0
    assert json.loads(faster.stdout)["metrics"]["step_ms_median"]["change_pct"] < 0
    plain = supplyline(["compare", base_run, slow_run])  # no thresholds: a side-by-side, never a failure
    assert plain.returncode == 0 and "median step" in plain.stdout


def test_compare_rejects_negative_threshold(base_run: str) -> None:
    _one_line_error(supplyline(["compare", base_run, base_run, "--max-slowdown", "-5"]), "compare")
