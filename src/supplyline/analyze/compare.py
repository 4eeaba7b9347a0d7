"""Two reports side by side, and the CI gate: did the input pipeline regress?

Pure functions of two typed reports (``build_report``), giving a typed ``Comparison``, and, for the slowdown gate, the two sides'
observed step times (one time-ordered list per run; several runs per side are pooled). Thresholds:
- ``max_slowdown_pct``: the NEW median step time may be at most this many percent above BASE's;
  a crossing fails only when it is also significant (``stats.compare_step_times``: one-sided
  Mann–Whitney p < 0.01 and the whole 95% block-bootstrap interval of the ratio of medians above
  the threshold, widened by the run-to-run allowance when a side has one run), otherwise it is
  reported "within noise (±x%)" and passes.
- ``max_data_wait_pct``: the NEW run's data-wait share of step time may be at most this many percent.

Other programs' load is taken out of the slowdown gate: when both sides' records carry each step's
wait for a CPU (``cpu_wait_s``: the training thread runnable but not running, from Linux schedstat),
the gate compares step time less that wait (``gate_times``), unless NEW's own processes keep more
cores busy and wait longer: then the wait may be the change's own doing and wall time is gated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supplyline import phases as P
from supplyline.analyze import stats
from supplyline.analyze.breakdown import observed_indices
from supplyline.analyze.checks import Finding
from supplyline.analyze.supply import job_cores
from supplyline.analyze.verdict import Verdict
from supplyline.errors import UserError
from supplyline.record import RunRecord
from supplyline.typed import to_plain

if TYPE_CHECKING:
    from supplyline.analyze.report import Report


def observed_step_times(record: RunRecord) -> list[float]:
    """The step times (s) the report's statistics use: observed (not what-if) steps, without the
    warm-up step when there are enough, as the breakdown counts them."""
    idx, _ = observed_indices(record)
    durations = record.steps.get("duration_s", [])
    return [durations[i] for i in idx]


# NEW's job may wait longer for a CPU of its own doing (more workers than cores): with this many
# more cores busy in its own processes and this much more of its step spent waiting, wall time is gated.
OWN_CORES_MORE = 0.3
OWN_WAIT_MORE = 0.05
WALL = "median step time"
OWN = "median step time less its wait for a CPU"


def own_step_times(record: RunRecord) -> list[float] | None:
    """The observed step times less the training thread's wait for a CPU in each step; None when
    the record has no such column (older records). A quiet run, or one without schedstat, holds
    zeros: its times are its wall times, and the other side's waits still come out."""
    idx, _ = observed_indices(record)
    durations, waits = record.steps.get("duration_s", []), record.steps.get("cpu_wait_s")
    if not waits or len(waits) != len(durations):
        return None
    # A step is never less than its own running time; the floor keeps a misread wait from zeroing it.
    return [max(durations[i] - waits[i], 0.05 * durations[i]) for i in idx]


@dataclass(frozen=True)
class GateBasis:
    """The step times the slowdown gate compares, and the figures that chose them."""

    what: str  # WALL or OWN
    base_wait_share: float | None  # share of the observed step time spent waiting for a CPU
    new_wait_share: float | None
    base_job_cores: float | None  # cores the job's own processes kept busy
    new_job_cores: float | None
    note: str | None  # one line when the basis needs saying


def _wait_share(records: Sequence[RunRecord]) -> float | None:
    wall = waited = 0.0
    for r in records:
        idx, _ = observed_indices(r)
        waits = r.steps.get("cpu_wait_s")
        if not waits:
            return None
        wall += sum(r.steps["duration_s"][i] for i in idx)
        waited += sum(waits[i] for i in idx)
    return waited / wall if wall > 0 else None


def _cores(records: Sequence[RunRecord]) -> float | None:
    values = [c for c in (job_cores(r) for r in records) if c is not None]
    return sum(values) / len(values) if values else None


def gate_times(
    base: Sequence[RunRecord], new: Sequence[RunRecord]
) -> tuple[list[list[float]], list[list[float]], GateBasis]:
    """Each side's step times for the slowdown gate (one list per run) and the basis they are on:
    less the waits for a CPU when every run has them, else wall time."""
    wall_b, wall_n = [observed_step_times(r) for r in base], [observed_step_times(r) for r in new]
    own_b, own_n = [own_step_times(r) for r in base], [own_step_times(r) for r in new]
    share_b, share_n = _wait_share(base), _wait_share(new)
    cores_b, cores_n = _cores(base), _cores(new)
    figures = (share_b, share_n, cores_b, cores_n)
    if any(t is None for t in [*own_b, *own_n]) or share_b is None or share_n is None or share_b == share_n == 0:
        return wall_b, wall_n, GateBasis(WALL, *figures, None)  # no column, or nothing waited: wall time
    if (
        cores_b is not None
        and cores_n is not None
        and cores_n > cores_b + OWN_CORES_MORE
        and share_n > share_b + OWN_WAIT_MORE
    ):
        note = (
            f"NEW's own processes keep more cores busy ({cores_n:.1f} vs {cores_b:.1f}) and its training thread "
            f"waits longer for a CPU ({share_n:.0%} vs {share_b:.0%} of step time): that wait may be the change's "
            "own doing, so the gate compares wall time"
        )
        return wall_b, wall_n, GateBasis(WALL, *figures, note)
    note = (
        f"the gate takes out the time the training thread waited for a CPU (BASE {share_b:.0%}, NEW {share_n:.0%} "
        "of step time): other programs' load is not the change's"
    )
    return [t for t in own_b if t is not None], [t for t in own_n if t is not None], GateBasis(OWN, *figures, note)


def _change_pct(base: float | None, new: float | None) -> float | None:
    if not base or new is None:
        return None
    return (new / base - 1.0) * 100.0


_OMIT = {"omit_none": True}  # left out of the JSON when None, as the dict form always did


@dataclass
class Metric:
    """One row of the table: BASE, NEW, the change, and the 95% intervals when step times were pooled."""

    base: float | None
    new: float | None
    change_pct: float | None
    base_interval: list[float] | None = field(default=None, metadata=_OMIT)
    new_interval: list[float] | None = field(default=None, metadata=_OMIT)

    def refresh_change(self) -> None:
        self.change_pct = _change_pct(self.base, self.new)


@dataclass(frozen=True)
class PhaseDelta:
    base: float
    new: float
    change_points: float  # percentage points, NEW less BASE


@dataclass(frozen=True)
class Gate:
    """One threshold and whether NEW crossed it."""

    gate: str  # max_slowdown | max_data_wait
    limit_pct: float
    value_pct: float | None
    failed: bool
    significant: bool | None = field(default=None, metadata=_OMIT)  # the slowdown gate with step times
    noise_pct: float | None = field(default=None, metadata=_OMIT)
    text: str = ""


@dataclass(frozen=True)
class FindingBrief:
    check: str
    severity: str
    share_of_step_time: float


@dataclass(frozen=True)
class FindingsDelta:
    base: list[FindingBrief]
    new: list[FindingBrief]
    appeared: list[str]  # checks NEW has and BASE has not
    resolved: list[str]


@dataclass(frozen=True)
class Slowdown:
    """The slowdown test in full: the basis of the gate's step times, the ratio and its intervals."""

    basis: str  # "own" (less the waits for a CPU) or "wall"
    base_cpu_wait_share: float | None
    new_cpu_wait_share: float | None
    base_job_cores: float | None
    new_job_cores: float | None
    note: str | None
    ratio: float
    ratio_interval: list[float]
    decision_interval: list[float]
    run_to_run_allowance_pct: float
    runs_note: str | None
    confidence: float
    p_value: float
    alpha: float
    significant: bool
    noise_pct: float
    base_steps: int
    new_steps: int
    base_runs: int
    new_runs: int


@dataclass(frozen=True)
class Side:
    target: str
    verdict: Verdict


@dataclass(frozen=True)
class Comparison:
    """What ``compare`` prints and ``compare --json`` writes."""

    base: Side
    new: Side
    metrics: dict[str, Metric]  # step_ms_median, step_ms_p95, steps_per_s, samples_per_s
    phase_share: dict[str, PhaseDelta]
    findings: FindingsDelta
    slowdown: Slowdown | None
    gates: list[Gate]
    failed: bool

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = to_plain(self)
        return out


def compare_reports(
    base: Report,
    new: Report,
    max_slowdown_pct: float | None = None,
    max_data_wait_pct: float | None = None,
    base_steps_s: Sequence[Sequence[float]] | None = None,
    new_steps_s: Sequence[Sequence[float]] | None = None,
    gate: tuple[Sequence[Sequence[float]], Sequence[Sequence[float]], GateBasis] | None = None,
) -> Comparison:
    """Compare two reports. ``base_steps_s``/``new_steps_s``: each side's observed step times in
    seconds, one list per run (``observed_step_times``), for the table and, without ``gate``
    (``gate_times``: the times the slowdown gate decides on, and their basis), for the gate too;
    without step times the gate falls back to a bare comparison of the two medians."""
    for label, rep in (("BASE", base), ("NEW", new)):
        if not rep.steps.observed:
            raise UserError(f"{label} ({rep.target.name}) has no observed training steps to compare")
    bs, ns = base.steps, new.steps
    metrics = {
        key: Metric(getattr(bs, key), getattr(ns, key), _change_pct(getattr(bs, key), getattr(ns, key)))
        for key in METRICS
    }
    phases = {
        p: PhaseDelta(share, new.phase_share.get(p, 0.0), (new.phase_share.get(p, 0.0) - share) * 100.0)
        for p, share in base.phase_share.items()
        if p in new.phase_share or P.BY_NAME.get(p, P.BY_NAME[P.OTHER]).partition  # GPU idle: only when both have it
    }
    base_checks = {f.check for f in base.findings}
    new_checks = {f.check for f in new.findings}
    gates: list[Gate] = []
    slowdown_test = None
    basis = None
    if base_steps_s is not None and new_steps_s is not None:
        gate_b, gate_n, basis = gate if gate is not None else (base_steps_s, new_steps_s, None)
        what = basis.what if basis is not None else WALL
        slowdown_test = stats.compare_step_times(gate_b, gate_n, max_slowdown_pct, what=what)
        _pooled_metrics(metrics, base_steps_s, new_steps_s)
    slowdown = metrics["step_ms_median"].change_pct
    if max_slowdown_pct is not None:
        gates.append(_slowdown_gate(max_slowdown_pct, slowdown, slowdown_test))
    if max_data_wait_pct is not None:
        wait = new.phase_share[P.DATA_WAIT] * 100.0
        text = f"data wait {wait:.1f}% of NEW's step time (limit {max_data_wait_pct:g}%)"
        gates.append(Gate("max_data_wait", max_data_wait_pct, wait, wait > max_data_wait_pct, text=text))
    return Comparison(
        base=Side(base.target.name, base.verdict),
        new=Side(new.target.name, new.verdict),
        metrics=metrics,
        phase_share=phases,
        findings=FindingsDelta(
            base=[_brief(f) for f in base.findings],
            new=[_brief(f) for f in new.findings],
            appeared=sorted(new_checks - base_checks),
            resolved=sorted(base_checks - new_checks),
        ),
        slowdown=None if slowdown_test is None else _slowdown(slowdown_test, basis),
        gates=gates,
        failed=any(g.failed for g in gates),
    )


METRICS = ("step_ms_median", "step_ms_p95", "steps_per_s", "samples_per_s")


def _pooled_metrics(
    metrics: dict[str, Metric], base_steps_s: Sequence[Sequence[float]], new_steps_s: Sequence[Sequence[float]]
) -> None:
    """Median step time and steps/s from the pooled step lists, with the block-bootstrap 95%
    intervals the gate uses (drift within runs and spread between runs included), so the table
    shows the figures the gate decided on."""
    median, rate, samples = metrics["step_ms_median"], metrics["steps_per_s"], metrics["samples_per_s"]
    for side, steps in (("base", base_steps_s), ("new", new_steps_s)):
        med = stats.block_median_interval(steps)
        setattr(median, side, med.estimate * 1000.0)
        setattr(median, f"{side}_interval", [med.low * 1000.0, med.high * 1000.0])
        if med.low > 0:
            mean_rate = getattr(rate, side)
            setattr(rate, side, 1.0 / med.estimate)
            setattr(rate, f"{side}_interval", [1.0 / med.high, 1.0 / med.low])
            per_s = getattr(samples, side)
            if per_s and mean_rate:  # the same rate in samples: its row must not tell another story
                setattr(samples, side, per_s / mean_rate / med.estimate)
    for m in (median, rate, samples):
        m.refresh_change()


def _slowdown_gate(limit_pct: float, slowdown: float | None, test: stats.SlowdownTest | None) -> Gate:
    if test is None:  # reports only: the bare median comparison of older callers
        failed = slowdown is not None and slowdown > limit_pct
        return Gate(
            "max_slowdown",
            limit_pct,
            slowdown,
            failed,
            text=f"median step time {slowdown:+.1f}% vs BASE (limit +{limit_pct:g}%)",
        )
    return Gate("max_slowdown", limit_pct, test.change_pct, test.failed, test.significant, test.noise_pct, test.text)


def _slowdown(test: stats.SlowdownTest, basis: GateBasis | None) -> Slowdown:
    b = GateBasis(WALL, None, None, None, None, None) if basis is None else basis
    return Slowdown(
        basis="own" if b.what == OWN else "wall",
        base_cpu_wait_share=b.base_wait_share,
        new_cpu_wait_share=b.new_wait_share,
        base_job_cores=b.base_job_cores,
        new_job_cores=b.new_job_cores,
        note=b.note,
        ratio=test.ratio.estimate,
        ratio_interval=[test.ratio.low, test.ratio.high],
        decision_interval=[test.decision.low, test.decision.high],
        run_to_run_allowance_pct=test.allowance_pct,
        runs_note=test.runs_note,
        confidence=test.ratio.confidence,
        p_value=test.p_value,
        alpha=stats.ALPHA,
        significant=test.significant,
        noise_pct=test.noise_pct,
        base_steps=test.base_steps,
        new_steps=test.new_steps,
        base_runs=test.base_runs,
        new_runs=test.new_runs,
    )


def _brief(f: Finding) -> FindingBrief:
    return FindingBrief(f.check, f.severity, f.share_of_step_time)
