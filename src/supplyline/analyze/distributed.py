"""Per-rank records -> one report for the job: ranks side by side, the straggler and its cause, a verdict.

In a data-parallel job every rank waits for the slowest one at each gradient all-reduce, so the
ranks' step times are equal and tell nothing; what differs is how each rank spends its step. The
rank the others wait for does its own work (data wait, compute, ...) longest and waits least in
the all-reduce; the others show the difference as collective time. So the straggler is the rank
with the most *own* time (step minus collective wait), confirmed by the others' collective wait,
and its cause is the phase in which it exceeds the other ranks most.

``merge_dir(DIR)`` is the entry point the ``merge`` and ``report`` commands call.
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics
from collections.abc import Callable
from typing import Any

from supplyline import phases as P
from supplyline.analyze.breakdown import observed_indices
from supplyline.analyze.report import build_report
from supplyline.atomic import atomic_write_json
from supplyline.errors import UserError
from supplyline.record import RunRecord, load_record
from supplyline.typed import to_plain

MERGED_REPORT_VERSION = 1
OWN_PHASES = tuple(p for p in P.PHASE_ORDER if p != P.COLLECTIVE)
CAUSE = {p: P.BY_NAME[p].cause for p in OWN_PHASES}
DOING = {p: P.BY_NAME[p].doing for p in OWN_PHASES}
# A rank is a straggler when its own time exceeds the others' by this share of the step (and by
# STRAGGLER_MIN_MS), the others' collective wait accounts for at least half of that excess, and one
# phase (its cause) explains at least half of it. The all-reduce's own transfer time is collective
# time on every rank, so small jobs on a slow network do not make a straggler out of noise.
STRAGGLER_MIN_SHARE = 0.15
STRAGGLER_MIN_MS = 2.0
# ... and it must be behind by half that excess in most steps: a rank that is preempted now and then
# (a shared host) or noise that makes a different rank lead each step is not a persistent straggler.
STRAGGLER_MIN_LEAD = 0.75
STRAGGLER_MIN_STEPS = 5
_RANK_DIR = re.compile(r"rank-(\d+)$")
# Written by each rank before its script runs (doctor/ranks.py): a rank with this file and no record
# started and was killed outright (SIGKILL, the OOM killer) or died in native code.
STARTED_FILE = "started.json"
KILLED_MESSAGE = "no record: killed (SIGKILL, e.g. the OOM killer) or crashed in native code"


def is_distributed_dir(directory: str) -> bool:
    return bool(glob.glob(os.path.join(directory, "rank-*", "record.json")))


def load_rank_records(directory: str) -> tuple[dict[int, RunRecord], list[str]]:
    """The newest job's records in DIR/rank-K/, by rank; notes about folders left out."""
    found: dict[int, RunRecord] = {}
    notes: list[str] = []
    for path in sorted(glob.glob(os.path.join(directory, "rank-*", "record.json"))):
        m = _RANK_DIR.search(os.path.dirname(path))
        if not m:
            continue
        try:
            found[int(m.group(1))] = load_record(path)
        except UserError as exc:
            notes.append(f"rank {m.group(1)}: record not read ({exc})")
    if not found and notes:
        raise UserError(f"no readable rank record in {directory}: " + "; ".join(notes))
    if not found:
        raise UserError(
            f"no rank records in {directory} (expected {directory}/rank-K/record.json from "
            f"`torchrun ... -m supplyline doctor`)"
        )
    jobs: dict[str, list[int]] = {}
    for rank, rec in found.items():
        jobs.setdefault(_job_key(rec), []).append(rank)
    newest = max(jobs, key=lambda k: max(found[r].created_unix_s for r in jobs[k]))
    for key, ranks in jobs.items():
        if key != newest:
            notes.append(f"left out rank folders {sorted(ranks)}: they belong to an older launch")
    return {r: found[r] for r in sorted(jobs[newest])}, notes


def _job_key(record: RunRecord) -> str:
    d = record.distributed
    return str(d.get("job_key", "single-process")) if isinstance(d, dict) else "single-process"


def started_markers(directory: str, job_key: str) -> dict[int, dict[str, Any]]:
    """The ranks of this job that left a started marker in DIR/rank-K/ and no record: killed before writing it."""
    out: dict[int, dict[str, Any]] = {}
    for path in glob.glob(os.path.join(directory, "rank-*", STARTED_FILE)):
        m = _RANK_DIR.search(os.path.dirname(path))
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        written = os.path.exists(os.path.join(os.path.dirname(path), "record.json"))  # unreadable is not killed
        if m and not written and isinstance(data, dict) and data.get("job_key") == job_key:
            out[int(m.group(1))] = data
    return out


def merge_dir(directory: str) -> dict[str, Any]:
    """Merge DIR/rank-*/record.json into DIR/report.json; returns the merged report."""
    records, notes = load_rank_records(directory)
    report = merge_records(records, started_markers(directory, _job_key(next(iter(records.values())))))
    report["notes"] = notes + report["notes"]
    atomic_write_json(os.path.join(directory, "report.json"), report)
    return report


def rank_row(rank: int, record: RunRecord) -> dict[str, Any]:
    """One rank's line in the side-by-side table: medians per step, so one slow step does not decide."""
    rep = build_report(record)
    b = rep.breakdown
    d = record.distributed or {}
    phases = {p: (statistics.median(v) * 1e3 if v else 0.0) for p, v in b.per_step_phase_s.items()}
    idx = observed_indices(record)[0]
    own_series = [(record.steps["duration_s"][i] - c) * 1e3 for i, c in zip(idx, b.per_step_phase_s[P.COLLECTIVE])]
    step_ms = b.step_s_median * 1e3
    o = record.outcome
    return {
        "rank": rank,
        "node_rank": d.get("node_rank"),
        "hostname": d.get("hostname"),
        "local_rank": d.get("local_rank"),
        "steps": b.steps,
        "step_ms": step_ms,
        "phase_ms": phases,
        "own_ms": max(0.0, step_ms - phases[P.COLLECTIVE]),
        "outcome": {
            "reason": o.reason,
            "exit_code": o.exit_code,
            "exception_type": o.exception_type,
            "exception_message": o.exception_message,
            "ended_unix_s": record.created_unix_s,
        },
        "verdict": to_plain(rep.verdict),
        "top_finding": rep.findings[0].to_dict() if rep.findings else None,
        "collectives": d.get("collectives", {}),
        "_own_series": own_series,  # per-step own time, aligned across ranks by step index; not saved
    }


def merge_records(records: dict[int, RunRecord], started: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``started``: the ranks' started markers; a missing rank with one was killed before writing its record."""
    rows = [rank_row(r, rec) for r, rec in sorted(records.items())]
    first = next(iter(records.values()))
    world = int((first.distributed or {}).get("world_size") or len(records))
    missing = [r for r in range(world) if r not in records]
    markers: dict[int, dict[str, Any]] = started or {}
    killed = [r for r in missing if r in markers]
    active = [row for row in rows if row["steps"] > 0]
    straggler = find_straggler(active)
    crashes = killed_list(killed, markers) + crash_list(rows)
    for i, crash in enumerate(crashes):
        crash["first"] = i == 0
    for row in rows:
        del row["_own_series"]
    notes: list[str] = []
    unknown = [r for r in missing if r not in killed]
    if unknown:
        notes.append(
            f"no record from rank(s) {unknown}: killed before writing, its record unreadable, or their node's "
            f"rank-K folders were not copied into this directory"
        )
    if any(row["collectives"].get("cuda_buckets") for row in rows):
        notes.append(
            "CUDA gradient buckets: the all-reduce time is host-side (launch to completion callback); "
            "with NCCL the GPU stream may wait longer than the host shows"
        )
    return {
        "merged_report_version": MERGED_REPORT_VERSION,
        "kind": "distributed",
        "job": {
            "world_size": world,
            "ranks_reported": len(records),
            "nodes": sorted({str(r["hostname"]) for r in rows}),
            "job_key": _job_key(first),
            "target": first.target.name,
            "args": first.target.args,
        },
        "verdict": job_verdict(active, straggler, crashes, missing),
        "straggler": straggler,
        "side_by_side": side_by_side(active),
        "ranks": rows,
        "missing_ranks": missing,
        "crashes": crashes,
        "notes": notes,
    }


def _phase_ms(phase: str) -> Callable[[dict[str, Any]], float]:
    return lambda row: float(row["phase_ms"][phase])


def side_by_side(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per metric: the median rank's value and the worst rank's (ms per step)."""
    out: dict[str, dict[str, Any]] = {}
    metrics: dict[str, Callable[[dict[str, Any]], float]] = {
        "step": lambda r: r["step_ms"],
        "own": lambda r: r["own_ms"],
        **{p: _phase_ms(p) for p in P.PHASE_ORDER},
    }
    for name, get in metrics.items():
        if not rows:
            continue
        values = [(get(r), r["rank"]) for r in rows]
        worst, worst_rank = max(values)
        out[name] = {
            "median_ms": statistics.median(v for v, _ in values),
            "worst_ms": worst,
            "worst_rank": worst_rank if worst > 0 else None,
        }
    return out


def find_straggler(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rank the others wait for, its cause, and the evidence; None when the ranks keep pace."""
    if len(rows) < 2:
        return None
    slow = max(rows, key=lambda r: r["own_ms"])
    others = [r for r in rows if r is not slow]
    gap = slow["own_ms"] - statistics.median(r["own_ms"] for r in others)
    job_step = statistics.median(r["step_ms"] for r in rows)
    others_wait = statistics.median(r["phase_ms"][P.COLLECTIVE] for r in others)
    if gap < max(STRAGGLER_MIN_MS, STRAGGLER_MIN_SHARE * job_step) or others_wait < 0.5 * gap:
        return None
    excess = {p: slow["phase_ms"][p] - statistics.median(r["phase_ms"][p] for r in others) for p in OWN_PHASES}
    phase = max(excess, key=lambda p: excess[p])
    if excess[phase] < 0.5 * gap or leads_share(slow, others, 0.5 * gap) < STRAGGLER_MIN_LEAD:
        return None
    theirs = statistics.median(r["phase_ms"][phase] for r in others)
    kind = "all-reduce" if any(r["collectives"].get("ddp_models") for r in rows) else "collectives"
    doing = DOING[phase].format(x=f"{slow['phase_ms'][phase]:.0f}")
    sentence = (
        f"rank {slow['rank']} {doing} (the others "
        f"{theirs:.0f} ms); the others wait for rank {slow['rank']} in {kind} ({others_wait:.0f} ms per step)"
    )
    speedup = job_step / max(job_step - gap, 1e-9)
    top = slow["top_finding"] or {}
    if top.get("expected_speedup"):  # the rank's own what-if bound (its consumer rate) caps the estimate
        speedup = min(speedup, float(top["expected_speedup"]))
    return {
        "rank": slow["rank"],
        "hostname": slow["hostname"],
        "cause": CAUSE[phase],
        "phase": phase,
        "phase_ms": slow["phase_ms"][phase],
        "others_phase_ms": theirs,
        "own_excess_ms": gap,
        "others_collective_ms": others_wait,
        "sentence": sentence,
        "expected_speedup_if_fixed": speedup,
        "its_top_finding": slow["top_finding"],
    }


def leads_share(slow: dict[str, Any], others: list[dict[str, Any]], margin_ms: float) -> float:
    """Share of the steps (same index on every rank) in which ``slow`` did ``margin_ms`` more own work than
    every other rank."""
    series = [r["_own_series"] for r in others]
    n = min([len(slow["_own_series"]), *(len(s) for s in series)])
    if n < STRAGGLER_MIN_STEPS:
        return 0.0
    leads = sum(1 for i in range(n) if all(slow["_own_series"][i] - s[i] >= margin_ms for s in series))
    return leads / n


def killed_list(ranks: list[int], started: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Ranks that started and left no record: the kill is the cause the survivors' errors follow from."""
    return [
        {
            "rank": r,
            "reason": "killed",
            "exit_code": None,
            "exception_type": None,
            "exception_message": f"{KILLED_MESSAGE} (pid {started[r].get('pid')} on {started[r].get('hostname')})",
            "steps_before": None,
            "first": False,
        }
        for r in ranks
    ]


def crash_list(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ranks that did not end cleanly, the cause first: a rank's own failure before a signal before a
    peer's transport error (those follow from the first), then by the time each record was written."""
    failed = [
        r
        for r in rows
        if r["outcome"]["reason"] in ("exception", "terminated", "interrupted")
        or r["outcome"]["exit_code"] not in (0, None)
    ]
    failed.sort(key=lambda r: (_consequence_rank(r["outcome"]), r["outcome"]["ended_unix_s"]))
    out = []
    for i, r in enumerate(failed):
        o = r["outcome"]
        out.append(
            {
                "rank": r["rank"],
                "reason": o["reason"],
                "exit_code": o["exit_code"],
                "exception_type": o["exception_type"],
                "exception_message": _first_line(o["exception_message"]),
                "steps_before": r["steps"],
                "first": i == 0,
            }
        )
    return out


_PEER_LOST = (
    "closed by peer",
    "reset by peer",
    "remote worker crashing",
    "Broken pipe",
    "NCCL communicator was aborted",
)
_CALLBACK_PREFIX = "Got the following error when running the callback: "


def _consequence_rank(outcome: dict[str, Any]) -> int:
    """0: the rank's own failure; 1: stopped by a signal (the launcher, or a scheduler); 2: lost its peer."""
    message = outcome.get("exception_message") or ""
    if any(marker in message for marker in _PEER_LOST):
        return 2
    return 1 if outcome["reason"] in ("terminated", "interrupted") else 0


def _among(rows: list[dict[str, Any]]) -> str:
    if len(rows) < 2:
        return ""
    spread = (max(r["own_ms"] for r in rows) - min(r["own_ms"] for r in rows)) / max(
        statistics.median(r["step_ms"] for r in rows), 1e-9
    )
    return f"The {len(rows)} ranks with a record keep pace with each other (own work within {spread * 100:.0f}% of a step)."


def _first_line(message: str | None, limit: int = 240) -> str | None:
    """Peers of a crashed rank fail with long transport errors; their first line says enough."""
    if not message:
        return message
    line = message.strip().splitlines()[0]
    while _CALLBACK_PREFIX in line:  # errors raised through future callbacks are wrapped once per callback
        line = line.split(_CALLBACK_PREFIX, 1)[1].removeprefix("RuntimeError: ")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def job_verdict(
    rows: list[dict[str, Any]],
    straggler: dict[str, Any] | None,
    crashes: list[dict[str, Any]],
    missing: list[int] | None = None,
) -> dict[str, str]:
    crash = ""
    if crashes:
        c = crashes[0]
        if c["reason"] == "killed":
            crash = f"Rank {c['rank']} ended with {KILLED_MESSAGE}. "
        else:
            what = (
                f"{c['exception_type']}: {c['exception_message']}"
                if c["exception_type"]
                else c["exception_message"] or f"exit code {c['exit_code']}"
            )
            crash = f"Rank {c['rank']} failed after {c['steps_before']} steps ({what}). "
    if missing and straggler is None:
        # Without a rank's record nothing says whether the others waited for it: no "no straggler" claim.
        return {
            "bound": "unknown",
            "sentence": crash + f"Cannot judge whether rank(s) {missing} held the others back: no record from "
            f"{'it' if len(missing) == 1 else 'them'}. " + _among(rows),
        }
    if not rows:
        return {"bound": "unknown", "sentence": crash + "No rank observed a training step."}
    if straggler is not None:
        return {
            "bound": straggler["cause"],
            "sentence": crash + f"Straggler: {straggler['sentence']}. The whole job "
            f"runs at rank {straggler['rank']}'s pace; fixing it should give about "
            f"{straggler['expected_speedup_if_fixed']:.1f}× (see {'rank-' + str(straggler['rank'])}/report.json).",
        }
    wait = statistics.median(r["phase_ms"][P.COLLECTIVE] / r["step_ms"] if r["step_ms"] else 0.0 for r in rows)
    if wait >= 0.20:
        return {
            "bound": P.COLLECTIVE,
            "sentence": crash + f"Communication-bound: every rank spends about "
            f"{wait * 100:.0f}% of its step in collectives and no single rank holds the others back.",
        }
    middle = sorted(rows, key=lambda r: r["step_ms"])[len(rows) // 2]
    spread = (max(r["own_ms"] for r in rows) - min(r["own_ms"] for r in rows)) / max(middle["step_ms"], 1e-9)
    return {
        "bound": middle["verdict"]["bound"],
        "sentence": crash + f"No straggler: the {len(rows)} ranks keep pace "
        f"(own work within {spread * 100:.0f}% of a step). Rank {middle['rank']} (median): "
        f"{middle['verdict']['sentence']}",
    }
