"""compare_reports with the two sides' step times: the slowdown gate decides with the test."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from supplyline.analyze.compare import compare_reports
from supplyline.analyze.report import Report, build_report

sys.path.insert(0, str(Path(__file__).parent.parent / "analyze"))
from handmade import record, sample


def _report(steps_s: list[float]) -> Report:
    """A typed report of a handmade run whose steps took ``steps_s``."""
    return build_report(record(steps=len(steps_s), durations=list(steps_s)))


def _compare(*args: Any, **kw: Any) -> dict[str, Any]:
    """The comparison as ``compare --json`` writes it."""
    return compare_reports(*args, **kw).to_dict()


def _steps(n: int, scale: float, seed: int) -> list[float]:
    return list(scale * np.random.default_rng(seed).lognormal(np.log(0.01), 0.2, n))


def test_a_noisy_crossing_passes_with_the_noise_named() -> None:
    base = [v / 1000 for v in (8.0, 9.0, 9.5, 10.0, 10.5, 11.0, 11.5, 12.0, 13.0, 14.0)]  # ±25% spread
    new = [v * 1.12 for v in reversed(base)]  # 12% slower, the same spread
    bare = _compare(_report(base), _report(new), max_slowdown_pct=5)
    tested = _compare(_report(base), _report(new), 5, None, [base], [new])
    assert bare["failed"], "the bare median comparison fails on a 10-step crossing"
    gate = tested["gates"][0]
    assert not tested["failed"] and not gate["failed"] and "within noise (±" in gate["text"]
    assert tested["slowdown"]["ratio_interval"][0] < 1.05 < tested["slowdown"]["ratio"]


def test_a_real_slowdown_fails_and_the_table_carries_intervals() -> None:
    base, new = _steps(300, 1.0, 1), _steps(300, 1.5, 2)  # beyond 10% + the run-to-run allowance
    result = _compare(_report(base), _report(new), 10, None, [base], [new])
    assert result["failed"] and result["gates"][0]["significant"]
    median = result["metrics"]["step_ms_median"]
    assert median["base_interval"][0] < median["base"] < median["base_interval"][1]
    assert median["new_interval"][0] > median["base_interval"][1]
    assert result["slowdown"]["p_value"] < result["slowdown"]["alpha"]


def test_pooled_sides_use_every_run() -> None:
    runs = [_steps(50, 1.0, s) for s in range(3)]
    result = _compare(_report(runs[0]), _report(runs[1]), 0, None, runs[:2], runs[2:])
    slow = result["slowdown"]
    assert (slow["base_runs"], slow["new_runs"], slow["base_steps"], slow["new_steps"]) == (2, 1, 100, 50)
    assert result["metrics"]["step_ms_median"]["base"] == np.median(np.concatenate(runs[:2])) * 1000


def _loaded(seed: int, wait: float, job_cpu: float = 95.0, slower: float = 1.0):
    """A handmade run of 60 ~10 ms steps of which ``wait`` (a share) was spent waiting for a CPU."""
    own = _steps(60, slower, seed)
    durations = [t / (1 - wait) for t in own]
    rec = record(steps=60, durations=durations, monitor=[sample(1000.0 + i * 0.1) for i in range(6)])
    rec.steps["cpu_wait_s"] = [d - t for d, t in zip(durations, own)]
    for s in rec.monitor.samples:
        s.processes[0].cpu_pct = job_cpu
    return rec


def test_other_programs_load_is_taken_out_of_the_gate() -> None:
    from supplyline.analyze.compare import OWN, gate_times, observed_step_times

    quiet, loaded = _loaded(1, 0.02), _loaded(2, 0.5)  # a neighbour doubled the wall time
    wall = [observed_step_times(quiet)], [observed_step_times(loaded)]
    base_s, new_s, basis = gate_times([quiet], [loaded])
    assert basis.what == OWN and basis.new_wait_share is not None and basis.new_wait_share > 0.45
    result = _compare(_report(wall[0][0]), _report(wall[1][0]), 10, None, *wall, (base_s, new_s, basis))
    assert not result["failed"] and result["slowdown"]["basis"] == "own", result["gates"][0]["text"]
    assert result["metrics"]["step_ms_median"]["change_pct"] > 80  # the table still shows the wall time
    assert _compare(_report(wall[0][0]), _report(wall[1][0]), 10, None, *wall)["failed"]  # wall alone fails
    # a real slowdown still fails under load
    slow = _loaded(3, 0.5, slower=1.4)
    b, n, basis = gate_times([quiet], [slow])
    assert _compare(_report(b[0]), _report(n[0]), 10, None, b, n, (b, n, basis))["failed"]


def test_a_wait_of_the_jobs_own_making_is_gated_on_wall_time() -> None:
    from supplyline.analyze.compare import WALL, gate_times

    base, crowded = _loaded(1, 0.02, job_cpu=95.0), _loaded(2, 0.4, job_cpu=190.0)  # NEW's workers took the cores
    _, _, basis = gate_times([base], [crowded])
    assert basis.what == WALL and basis.note is not None and "own doing" in basis.note
    old = _loaded(1, 0.02)
    del old.steps["cpu_wait_s"]  # an older record: no wait column, wall time
    assert gate_times([old], [crowded])[2].what == WALL


def test_a_quiet_run_with_no_wait_at_all_still_takes_the_loaded_sides_wait_out() -> None:
    from supplyline.analyze.compare import OWN, WALL, gate_times

    quiet, loaded = _loaded(1, 0.0), _loaded(2, 0.5)  # every step of the quiet run waited 0 s
    assert gate_times([quiet], [loaded])[2].what == OWN
    assert gate_times([quiet], [_loaded(3, 0.0)])[2].what == WALL  # nothing waited on either side


def test_the_json_form_leaves_out_what_was_not_measured() -> None:
    """Without step times: no intervals in the table, no test figures in the gate, no slowdown section;
    with them, both, in the order ``compare --json`` always wrote."""
    base, new = _steps(40, 1.0, 1), _steps(40, 1.0, 2)
    bare = _compare(_report(base), _report(new), 10, 50)
    assert list(bare["metrics"]["step_ms_median"]) == ["base", "new", "change_pct"]
    assert [list(g) for g in bare["gates"]] == [["gate", "limit_pct", "value_pct", "failed", "text"]] * 2
    assert bare["slowdown"] is None and bare["findings"]["appeared"] == []
    tested = _compare(_report(base), _report(new), 10, None, [base], [new])
    median = tested["metrics"]["step_ms_median"]
    assert list(median) == ["base", "new", "change_pct", "base_interval", "new_interval"]
    assert list(tested["gates"][0]) == ["gate", "limit_pct", "value_pct", "failed", "significant", "noise_pct", "text"]
    assert tested["slowdown"]["basis"] == "wall" and tested["base"]["verdict"]["sentence"]
