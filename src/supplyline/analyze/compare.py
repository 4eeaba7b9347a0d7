"""Two reports side by side, and the CI gate: did the input pipeline regress?

Pure functions of two report dicts (``build_report``). Thresholds:
- ``max_slowdown_pct``: the NEW median step time may be at most this many percent above BASE's.
- ``max_data_wait_pct``: the NEW run's data-wait share of step time may be at most this many percent.
"""

from __future__ import annotations

from typing import Any

from supplyline import phases as P
from supplyline.errors import UserError


def _change_pct(base: float | None, new: float | None) -> float | None:
    if not base or new is None:
        return None
    return (new / base - 1.0) * 100.0


def compare_reports(
    base: dict[str, Any],
    new: dict[str, Any],
    max_slowdown_pct: float | None = None,
    max_data_wait_pct: float | None = None,
) -> dict[str, Any]:
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
    slowdown = metrics["step_ms_median"]["change_pct"]
    if max_slowdown_pct is not None:
        gates.append(
            {
                "gate": "max_slowdown",
                "limit_pct": max_slowdown_pct,
                "value_pct": slowdown,
                "failed": slowdown is not None and slowdown > max_slowdown_pct,
                "text": f"median step time {slowdown:+.1f}% vs BASE (limit +{max_slowdown_pct:g}%)",
            }
        )
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
        "gates": gates,
        "failed": any(g["failed"] for g in gates),
    }


def _brief(f: dict[str, Any]) -> dict[str, Any]:
    return {"check": f["check"], "severity": f["severity"], "share_of_step_time": f["share_of_step_time"]}
