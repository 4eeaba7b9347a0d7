"""Per-rank records -> one report for the job: ranks side by side, the straggler and its cause, a verdict.

In a data-parallel job every rank waits for the slowest one at each gradient all-reduce, so the
ranks' step times are equal and tell nothing; what differs is how each rank spends its step. The
rank the others wait for does its own work (data wait, compute, ...) longest and waits least in
the all-reduce; the others show the difference as collective time. So the straggler is the rank
with the most *own* time (step minus collective wait), confirmed by the others' collective wait,
and its cause is the phase in which it exceeds the other ranks most.

``merge_records(...) -> MergedReport`` is pure: the rank records in, the typed merged report out.
Reading the ranks' folders and writing ``report.json`` is ``doctor/merged.py``'s.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from supplyline import phases as P
from supplyline.analyze.breakdown import observed_indices
from supplyline.analyze.checks import Finding, FixSnippets
from supplyline.analyze.report import Report, build_report
from supplyline.analyze.verdict import Verdict
from supplyline.record import RunRecord
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
KILLED_MESSAGE = "no record: killed (SIGKILL, e.g. the OOM killer) or crashed in native code"


@dataclass(frozen=True)
class StartedMarker:
    """A rank's ``started.json`` (written before its script ran) where it left no record."""

    pid: int | None = None
    hostname: str | None = None


@dataclass(frozen=True)
class RankOutcome:
    reason: str
    exit_code: int | None
    exception_type: str | None
    exception_message: str | None
    ended_unix_s: float


@dataclass
class RankRow:
    """One rank's line in the side-by-side table: medians per step, so one slow step does not decide."""

    rank: int
    node_rank: int | None
    hostname: str | None
    local_rank: int | None
    steps: int
    step_ms: float
    phase_ms: dict[str, float]  # per phase (phases.PHASE_ORDER), median ms per step
    own_ms: float
    outcome: RankOutcome
    verdict: Verdict
    top_finding: Finding | None
    collectives: dict[str, object]  # the rank's collective counters, as its record holds them
    # Per-step own time, aligned across ranks by step index: the straggler's lead; not saved.
    own_series: list[float] = field(default_factory=list, metadata={"json": False})

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = to_plain(self)  # own_series is marked json=False: left out
        return out


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for, its cause, and the evidence."""

    rank: int
    hostname: str | None
    cause: str
    phase: P.PhaseName
    phase_ms: float
    others_phase_ms: float
    own_excess_ms: float
    others_collective_ms: float
    sentence: str
    expected_speedup_if_fixed: float
    its_top_finding: Finding | None


@dataclass
class Crash:
    """A rank that did not end cleanly; ``first`` marks the cause the others' failures follow from."""

    rank: int
    reason: str
    exit_code: int | None
    exception_type: str | None
    exception_message: str | None
    steps_before: int | None
    first: bool = False


@dataclass(frozen=True)
class SideCell:
    """One metric across the ranks: the median rank's value and the worst rank's (ms per step)."""

    median_ms: float
    worst_ms: float
    worst_rank: int | None


@dataclass(frozen=True)
class JobInfo:
    world_size: int
    ranks_reported: int
    nodes: list[str]
    job_key: str
    target: str
    args: list[str]


@dataclass(frozen=True)
class JobVerdict:
    bound: str
    sentence: str


@dataclass
class MergedReport:
    """The torchrun job's report: what ``DIR/report.json`` holds."""

    job: JobInfo
    verdict: JobVerdict
    straggler: Straggler | None
    side_by_side: dict[str, SideCell]
    ranks: list[RankRow]
    missing_ranks: list[int]
    crashes: list[Crash]
    notes: list[str]
    merged_report_version: int = MERGED_REPORT_VERSION
    kind: str = "distributed"

    def to_dict(self) -> dict[str, object]:
        return {
            "merged_report_version": self.merged_report_version,
            "kind": self.kind,
            "job": to_plain(self.job),
            "verdict": to_plain(self.verdict),
            "straggler": to_plain(self.straggler),
            "side_by_side": to_plain(self.side_by_side),
            "ranks": [r.to_dict() for r in self.ranks],
            "missing_ranks": list(self.missing_ranks),
            "crashes": to_plain(self.crashes),
            "notes": list(self.notes),
        }


def job_key(record: RunRecord) -> str:
    d = record.distributed
    return str(d.get("job_key", "single-process")) if isinstance(d, dict) else "single-process"


def world_size(records: dict[int, RunRecord]) -> int:
    first = next(iter(records.values()))
    return int((first.distributed or {}).get("world_size") or len(records))


def rank_row(rank: int, record: RunRecord, rep: Report) -> RankRow:
    """``rep``: the rank's own report, built with the same snippets as the rank's own report.json."""
    b = rep.breakdown
    d = record.distributed or {}
    phases = {p: (statistics.median(v) * 1e3 if v else 0.0) for p, v in b.per_step_phase_s.items()}
    idx = observed_indices(record)[0]
    own_series = [(record.steps["duration_s"][i] - c) * 1e3 for i, c in zip(idx, b.per_step_phase_s[P.COLLECTIVE])]
    step_ms = b.step_s_median * 1e3
    o = record.outcome
    collectives = d.get("collectives", {})
    return RankRow(
        rank=rank,
        node_rank=d.get("node_rank"),
        hostname=d.get("hostname"),
        local_rank=d.get("local_rank"),
        steps=b.steps,
        step_ms=step_ms,
        phase_ms=phases,
        own_ms=max(0.0, step_ms - phases[P.COLLECTIVE]),
        outcome=RankOutcome(o.reason, o.exit_code, o.exception_type, o.exception_message, record.created_unix_s),
        verdict=rep.verdict,
        top_finding=rep.findings[0] if rep.findings else None,
        collectives=dict(collectives) if isinstance(collectives, dict) else {},
        own_series=own_series,
    )


def merge_records(
    records: dict[int, RunRecord],
    started: dict[int, StartedMarker] | None = None,
    snippets: FixSnippets | None = None,
) -> MergedReport:
    """``started``: the ranks' started markers; a missing rank with one was killed before writing its
    record. ``snippets``: as the ranks' own reports were written with (the top fix reads the same)."""
    rows = [rank_row(r, rec, build_report(rec, snippets)) for r, rec in sorted(records.items())]
    first = next(iter(records.values()))
    world = world_size(records)
    missing = [r for r in range(world) if r not in records]
    markers = started or {}
    killed = [r for r in missing if r in markers]
    active = [row for row in rows if row.steps > 0]
    straggler = find_straggler(active)
    crashes = killed_list(killed, markers) + crash_list(rows)
    for i, crash in enumerate(crashes):
        crash.first = i == 0
    notes: list[str] = []
    unknown = [r for r in missing if r not in killed]
    if unknown:
        notes.append(
            f"no record from rank(s) {unknown}: killed before writing, its record unreadable, or their node's "
            f"rank-K folders were not copied into this directory"
        )
    if any(row.collectives.get("cuda_buckets") for row in rows):
        notes.append(
            "CUDA gradient buckets: the all-reduce time is host-side (launch to completion callback); "
            "with NCCL the GPU stream may wait longer than the host shows"
        )
    job = JobInfo(
        world_size=world,
        ranks_reported=len(records),
        nodes=sorted({str(r.hostname) for r in rows}),
        job_key=job_key(first),
        target=first.target.name,
        args=list(first.target.args),
    )
    return MergedReport(
        job=job,
        verdict=job_verdict(active, straggler, crashes, missing),
        straggler=straggler,
        side_by_side=side_by_side(active),
        ranks=rows,
        missing_ranks=missing,
        crashes=crashes,
        notes=notes,
    )


def side_by_side(rows: list[RankRow]) -> dict[str, SideCell]:
    """Per metric: the median rank's value and the worst rank's (ms per step)."""
    if not rows:
        return {}
    metrics: dict[str, Callable[[RankRow], float]] = {
        "step": lambda r: r.step_ms,
        "own": lambda r: r.own_ms,
        **{p: _phase_ms(p) for p in P.PHASE_ORDER},
    }
    out: dict[str, SideCell] = {}
    for name, get in metrics.items():
        values = [(get(r), r.rank) for r in rows]
        worst, worst_rank = max(values)
        out[name] = SideCell(statistics.median(v for v, _ in values), worst, worst_rank if worst > 0 else None)
    return out


def _phase_ms(phase: str) -> Callable[[RankRow], float]:
    return lambda row: float(row.phase_ms[phase])


def find_straggler(rows: list[RankRow]) -> Straggler | None:
    """The rank the others wait for, its cause, and the evidence; None when the ranks keep pace."""
    if len(rows) < 2:
        return None
    slow = max(rows, key=lambda r: r.own_ms)
    others = [r for r in rows if r is not slow]
    gap = slow.own_ms - statistics.median(r.own_ms for r in others)
    job_step = statistics.median(r.step_ms for r in rows)
    others_wait = statistics.median(r.phase_ms[P.COLLECTIVE] for r in others)
    if gap < max(STRAGGLER_MIN_MS, STRAGGLER_MIN_SHARE * job_step) or others_wait < 0.5 * gap:
        return None
    excess = {p: slow.phase_ms[p] - statistics.median(r.phase_ms[p] for r in others) for p in OWN_PHASES}
    phase = max(excess, key=lambda p: excess[p])
    if excess[phase] < 0.5 * gap or leads_share(slow, others, 0.5 * gap) < STRAGGLER_MIN_LEAD:
        return None
    theirs = statistics.median(r.phase_ms[phase] for r in others)
    kind = "all-reduce" if any(r.collectives.get("ddp_models") for r in rows) else "collectives"
    doing = DOING[phase].format(x=f"{slow.phase_ms[phase]:.0f}")
    sentence = (
        f"rank {slow.rank} {doing} (the others "
        f"{theirs:.0f} ms); the others wait for rank {slow.rank} in {kind} ({others_wait:.0f} ms per step)"
    )
    speedup = job_step / max(job_step - gap, 1e-9)
    top = slow.top_finding
    if top is not None and top.expected_speedup:  # the rank's own what-if bound (its consumer rate) caps it
        speedup = min(speedup, float(top.expected_speedup))
    return Straggler(
        rank=slow.rank,
        hostname=slow.hostname,
        cause=CAUSE[phase],
        phase=phase,
        phase_ms=slow.phase_ms[phase],
        others_phase_ms=theirs,
        own_excess_ms=gap,
        others_collective_ms=others_wait,
        sentence=sentence,
        expected_speedup_if_fixed=speedup,
        its_top_finding=slow.top_finding,
    )


def leads_share(slow: RankRow, others: list[RankRow], margin_ms: float) -> float:
    """Share of the steps (same index on every rank) in which ``slow`` did ``margin_ms`` more own work than
    every other rank."""
    series = [r.own_series for r in others]
    n = min([len(slow.own_series), *(len(s) for s in series)])
    if n < STRAGGLER_MIN_STEPS:
        return 0.0
    leads = sum(1 for i in range(n) if all(slow.own_series[i] - s[i] >= margin_ms for s in series))
    return leads / n


def killed_list(ranks: list[int], started: dict[int, StartedMarker]) -> list[Crash]:
    """Ranks that started and left no record: the kill is the cause the survivors' errors follow from."""
    return [
        Crash(
            rank=r,
            reason="killed",
            exit_code=None,
            exception_type=None,
            exception_message=f"{KILLED_MESSAGE} (pid {started[r].pid} on {started[r].hostname})",
            steps_before=None,
        )
        for r in ranks
    ]


def crash_list(rows: list[RankRow]) -> list[Crash]:
    """Ranks that did not end cleanly, the cause first: a rank's own failure before a signal before a
    peer's transport error (those follow from the first), then by the time each record was written."""
    failed = [
        r
        for r in rows
        if r.outcome.reason in ("exception", "terminated", "interrupted") or r.outcome.exit_code not in (0, None)
    ]
    failed.sort(key=lambda r: (_consequence_rank(r.outcome), r.outcome.ended_unix_s))
    return [
        Crash(
            rank=r.rank,
            reason=r.outcome.reason,
            exit_code=r.outcome.exit_code,
            exception_type=r.outcome.exception_type,
            exception_message=_first_line(r.outcome.exception_message),
            steps_before=r.steps,
            first=i == 0,
        )
        for i, r in enumerate(failed)
    ]


_PEER_LOST = (
    "closed by peer",
    "reset by peer",
    "remote worker crashing",
    "Broken pipe",
    "NCCL communicator was aborted",
)
_CALLBACK_PREFIX = "Got the following error when running the callback: "


def _consequence_rank(outcome: RankOutcome) -> int:
    """0: the rank's own failure; 1: stopped by a signal (the launcher, or a scheduler); 2: lost its peer."""
    message = outcome.exception_message or ""
    if any(marker in message for marker in _PEER_LOST):
        return 2
    return 1 if outcome.reason in ("terminated", "interrupted") else 0


def _among(rows: list[RankRow]) -> str:
    if len(rows) < 2:
        return ""
    spread = (max(r.own_ms for r in rows) - min(r.own_ms for r in rows)) / max(
        statistics.median(r.step_ms for r in rows), 1e-9
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


def crash_words(crash: Crash) -> str:
    """``ValueError: bad batch``, the message alone, or the exit code."""
    if crash.exception_type:
        return f"{crash.exception_type}: {crash.exception_message}"
    return crash.exception_message or f"exit code {crash.exit_code}"


def job_verdict(
    rows: list[RankRow],
    straggler: Straggler | None,
    crashes: list[Crash],
    missing: list[int] | None = None,
) -> JobVerdict:
    crash = ""
    if crashes:
        c = crashes[0]
        if c.reason == "killed":
            crash = f"Rank {c.rank} ended with {KILLED_MESSAGE}. "
        else:
            crash = f"Rank {c.rank} failed after {c.steps_before} steps ({crash_words(c)}). "
    if missing and straggler is None:
        # Without a rank's record nothing says whether the others waited for it: no "no straggler" claim.
        return JobVerdict(
            "unknown",
            crash + f"Cannot judge whether rank(s) {missing} held the others back: no record from "
            f"{'it' if len(missing) == 1 else 'them'}. " + _among(rows),
        )
    if not rows:
        return JobVerdict("unknown", crash + "No rank observed a training step.")
    if straggler is not None:
        return JobVerdict(
            straggler.cause,
            crash + f"Straggler: {straggler.sentence}. The whole job "
            f"runs at rank {straggler.rank}'s pace; fixing it should give about "
            f"{straggler.expected_speedup_if_fixed:.1f}× (see {'rank-' + str(straggler.rank)}/report.json).",
        )
    wait = statistics.median(r.phase_ms[P.COLLECTIVE] / r.step_ms if r.step_ms else 0.0 for r in rows)
    if wait >= 0.20:
        return JobVerdict(
            P.COLLECTIVE,
            crash + f"Communication-bound: every rank spends about "
            f"{wait * 100:.0f}% of its step in collectives and no single rank holds the others back.",
        )
    middle = sorted(rows, key=lambda r: r.step_ms)[len(rows) // 2]
    spread = (max(r.own_ms for r in rows) - min(r.own_ms for r in rows)) / max(middle.step_ms, 1e-9)
    return JobVerdict(
        middle.verdict.bound,
        crash + f"No straggler: the {len(rows)} ranks keep pace "
        f"(own work within {spread * 100:.0f}% of a step). Rank {middle.rank} (median): "
        f"{middle.verdict.sentence}",
    )
