"""Two reports side by side, and the CI gate: did the input pipeline regress?

Pure functions of two report dicts (``build_report``) and, for the slowdown gate, the two sides'
observed step times (one time-ordered list per run; several runs per side are pooled). Thresholds:
- ``max_slowdown_pct``: the NEW median step time may be at most this many percent above BASE's;
  a crossing fails only when it is also significant (``stats.compare_step_times``: one-sided
  Mann–Whitney p < 0.01 and the whole 95% block-bootstrap interval of the ratio of medians above
  the threshold, widened by the run-to-run allowance when a side has one run), otherwise it is
  reported "within noise (±x%)" and passes.
- ``max_data_wait_pct``: the NEW run's data-wait share of step time may be at most this many percent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from supplyline import phases as P
from supplyline.analyze import stats
from supplyline.analyze.breakdown import observed_indices
from supplyline.errors import UserError
from supplyline.record import RunRecord


def observed_step_times(record: RunRecord) -> list[float]:
    """The step times (s) the report's statistics use: observed (not what-if) steps, without the
    warm-up step when there are enough, as the breakdown counts them."""
    idx, _ = observed_indices(record)
    durations = record.steps.get("duration_s", [])
    return [durations[i] for i in idx]


def _change_pct(base: float | None, new: float | None) -> float | None:
    if not base or new is None:
        return None
    return (new / base - 1.0) * 100.0


def compare_reports(
    base: dict[str, Any],
    new: dict[str, Any],
    max_slowdown_pct: float | None = None,
    max_data_wait_pct: float | None = None,
    base_steps_s: Sequence[Sequence[float]] | None = None,
    new_steps_s: Sequence[Sequence[float]] | None = None,
) -> dict[str, Any]:
    """Compare two reports. ``base_steps_s``/``new_steps_s``: each side's observed step times in
    seconds, one list per run (``observed_step_times``); without them the slowdown gate falls
    back to a bare comparison of the two medians, with no noise estimate."""
    for label, rep in (("BASE", base), ("NEW", new)):
        if not rep["steps"]["observed"]:
            raise UserError(f"{label} ({rep['target']['name']}) has no observed training steps to compare")
    bs, ns = base["steps"], new["steps"]
    metrics = {}
    for key in ("step_ms_median", "step_ms_p95", "steps_per_s", "samples_per_s"):
        metrics[key] = {"base": bs.get(key), "new": ns.get(key), "change_pct": _change_pct(bs.get(key), ns.get(key))}
    phases = {
        p: {
            "base": base["phase_share"][p],
            "new": new["phase_share"].get(p, 0.0),
            "change_points": (new["phase_share"].get(p, 0.0) - base["phase_share"][p]) * 100.0,
        }
        for p in base["phase_share"]
        if p in new["phase_share"] or P.BY_NAME.get(p, P.BY_NAME[P.OTHER]).partition  # GPU idle: only when both have it
    }
    base_checks = {f["check"] for f in base["findings"]}
    new_checks = {f["check"] for f in new["findings"]}
    gates = []
    slowdown_test = None
    if base_steps_s is not None and new_steps_s is not None:
        slowdown_test = stats.compare_step_times(base_steps_s, new_steps_s, max_slowdown_pct)
        _pooled_metrics(metrics, base_steps_s, new_steps_s)
    slowdown = metrics["step_ms_median"]["change_pct"]
    if max_slowdown_pct is not None:
        gates.append(_slowdown_gate(max_slowdown_pct, slowdown, slowdown_test))
    if max_data_wait_pct is not None:
        wait = new["phase_share"][P.DATA_WAIT] * 100.0
        gates.append(
            {
                "gate": "max_data_wait",
                "limit_pct": max_data_wait_pct,
                "value_pct": wait,
                "failed": wait > max_data_wait_pct,
                "text": f"data wait {wait:.1f}% of NEW's step time (limit {max_data_wait_pct:g}%)",
            }
        )
    return {
        "base": {"target": base["target"]["name"], "verdict": base["verdict"]},
        "new": {"target": new["target"]["name"], "verdict": new["verdict"]},
        "metrics": metrics,
        "phase_share": phases,
        "findings": {
            "base": [_brief(f) for f in base["findings"]],
            "new": [_brief(f) for f in new["findings"]],
            "appeared": sorted(new_checks - base_checks),
            "resolved": sorted(base_checks - new_checks),
        },
        "slowdown": None if slowdown_test is None else _slowdown_dict(slowdown_test),
        "gates": gates,
        "failed": any(g["failed"] for g in gates),
    }


def _pooled_metrics(
    metrics: dict[str, dict[str, Any]], base_steps_s: Sequence[Sequence[float]], new_steps_s: Sequence[Sequence[float]]
) -> None:
    """Median step time and steps/s from the pooled step lists, with the block-bootstrap 95%
    intervals the gate uses (drift within runs and spread between runs included), so the table
    shows the figures the gate decided on."""
    for side, steps in (("base", base_steps_s), ("new", new_steps_s)):
        med = stats.block_median_interval(steps)
        metrics["step_ms_median"][side] = med.estimate * 1000.0
        metrics["step_ms_median"][f"{side}_interval"] = [med.low * 1000.0, med.high * 1000.0]
        if med.low > 0:
            mean_rate = metrics["steps_per_s"][side]
            metrics["steps_per_s"][side] = 1.0 / med.estimate
            metrics["steps_per_s"][f"{side}_interval"] = [1.0 / med.high, 1.0 / med.low]
            samples = metrics["samples_per_s"][side]
            if samples and mean_rate:  # the same rate in samples: its row must not tell another story
                metrics["samples_per_s"][side] = samples / mean_rate / med.estimate
    for key in ("step_ms_median", "steps_per_s", "samples_per_s"):
        metrics[key]["change_pct"] = _change_pct(metrics[key]["base"], metrics[key]["new"])


def _slowdown_gate(limit_pct: float, slowdown: float | None, test: stats.SlowdownTest | None) -> dict[str, Any]:
    if test is None:  # report dicts only: the bare median comparison of older callers
        return {
            "gate": "max_slowdown",
            "limit_pct": limit_pct,
            "value_pct": slowdown,
            "failed": slowdown is not None and slowdown > limit_pct,
            "text": f"median step time {slowdown:+.1f}% vs BASE (limit +{limit_pct:g}%)",
        }
    return {
        "gate": "max_slowdown",
        "limit_pct": limit_pct,
        "value_pct": test.change_pct,
        "failed": test.failed,
        "significant": test.significant,
        "noise_pct": test.noise_pct,
        "text": test.text,
    }


def _slowdown_dict(test: stats.SlowdownTest) -> dict[str, Any]:
    return {
        "ratio": test.ratio.estimate,
        "ratio_interval": [test.ratio.low, test.ratio.high],
        "decision_interval": [test.decision.low, test.decision.high],
        "run_to_run_allowance_pct": test.allowance_pct,
        "runs_note": test.runs_note,
        "confidence": test.ratio.confidence,
        "p_value": test.p_value,
        "alpha": stats.ALPHA,
        "significant": test.significant,
        "noise_pct": test.noise_pct,
        "base_steps": test.base_steps,
        "new_steps": test.new_steps,
        "base_runs": test.base_runs,
        "new_runs": test.new_runs,
    }


def _brief(f: dict[str, Any]) -> dict[str, Any]:
    return {"check": f["check"], "severity": f["severity"], "share_of_step_time": f["share_of_step_time"]}
