"""RunRecord -> the typed Report: verdict, findings, breakdown, what-if and DataLoader facts.

Analysis runs once, here; every renderer (terminal, live, HTML, JSON, trace) takes the Report
and never recomputes it. ``Report.to_dict`` is report.json (schema in docs/report-schema.md);
the record stays the source of truth.
"""

from __future__ import annotations

import shlex
import statistics
from dataclasses import dataclass, field, fields, replace
from typing import Any

from supplyline import phases as P
from supplyline.analyze.breakdown import Breakdown, SourceLine, breakdown, nearest_rank, observed_indices
from supplyline.analyze.checks import (
    INPUT_CHECKS,
    MIN_SHARE,
    DatasetCommands,
    Evidence,
    Finding,
    FixSnippets,
    run_checks,
)
from supplyline.analyze.gpu_report import GpuIdleSection, gpu_idle_result, gpu_idle_section
from supplyline.analyze.oscillation import OscillationResult, detect_oscillation
from supplyline.analyze.recommend import recommended_loader
from supplyline.analyze.stats import TOO_FEW_ADVICE_DOCTOR, median_interval, share_text
from supplyline.analyze.supply import Stall, SupplySignal, supply_signal
from supplyline.analyze.trial_result import loader_trial, trial_decision
from supplyline.analyze.verdict import Verdict, verdict
from supplyline.collect.checkpoints import cadence, group_checkpoints
from supplyline.collect.events import LoaderInfo, TransferStats, TrialSegment
from supplyline.collect.nodes import display_name, wait_name, wait_words
from supplyline.errors import UserError
from supplyline.record import RunRecord, TargetInfo, load_record
from supplyline.typed import to_plain

REPORT_VERSION = 1
WHATIF_LABEL = (
    "what-if phases: the job's last batch replayed (compute-only) and its loader drained with no "
    "consumer (loader-only); these steps are not part of the observed figures. The replay steps are real "
    "optimizer updates: the script may log them as training batches after the observed ones"
)
REPLAY_NOTE = (
    "the what-if replay steps were real optimizer updates after the observed steps: the script may have "
    "logged them as training batches"
)
# The observed steps' spread quoted beside a what-if claim: the 10th and 90th percentiles.
SPREAD_Q = (0.10, 0.90)


@dataclass
class OutcomeSummary:
    exit_code: int
    reason: str  # completed | stopped | exception | sys_exit | interrupted
    stop_message: str | None
    exception_type: str | None
    exception_message: str | None
    wall_s: float


@dataclass
class StepStats:
    observed: int
    warmup_excluded: int
    step_ms_median: float
    step_ms_mean: float
    step_ms_p95: float
    steps_per_s: float
    samples_per_s: float | None
    batches_per_step: float
    # 95% bootstrap interval of the median step (stats.median_interval); null below 3 steps.
    step_ms_median_ci: list[float] | None = None


@dataclass
class Sampling:
    """How much the stack sampler saw: the compute / logging / other split of the time no hook timed
    (and every line share) rests on these samples; below the rule's minimum it is "too few to tell"."""

    samples: int
    unhooked_samples: int
    unhooked_share: float
    split_reliable: bool
    note: str | None


@dataclass
class WhatIfResult:
    label: str
    enabled: bool
    ran: bool
    note: str
    observed_steps_per_s: float | None
    compute_only_steps_per_s: float | None
    loader_only_steps_per_s: float | None
    # "At most N× faster without the input side": only when the replayed step is faster than the
    # observed steps' own spread and the step waits on data at all; null otherwise (see ``claim``).
    consumer_bound_speedup: float | None
    observed_step_ms_spread: list[float] | None = None  # [p10, p90] of the observed step times
    claim: str = ""  # the sentence the renderers print after the rates, true for this run


@dataclass
class LoaderFacts:
    batch_size: int | None
    num_workers: int
    pin_memory: bool
    prefetch_factor: int | None
    persistent_workers: bool
    multiprocessing_context: str | None
    dataset_type: str
    dataset_len: int | None
    batch_bytes: int | None
    epochs_started: int
    time_to_first_batch_s: float | None
    epoch_first_batch_s: list[float]
    stall: Stall
    worker_cpu_pct_mean: float | None
    host_cpu_busy_pct_mean: float | None
    tune_command: str | None
    preprocess_command: str | None
    loader_type: str = "DataLoader"  # the loader's class: StatefulDataLoader, a framework's subclass, ...
    loader_module: str = "torch.utils.data.dataloader"
    worker_method: str = "process"  # "thread": a torchdata.nodes ParallelMapper's thread workers
    dataset_shards: int | None = None  # a sharded IterableDataset's shards: workers past them get no data
    dataset_knobs: dict[str, Any] = field(default_factory=dict)  # a streaming library's own (MosaicML's predownload)

    @property
    def name(self) -> str:
        """How the sentences name it: ``DataLoader``, ``StatefulDataLoader``, ``torchdata.nodes Loader``."""
        return display_name(self.loader_type, self.loader_module)


@dataclass
class CheckpointTotals:
    saves: int  # outermost save calls, inside and outside steps
    seconds: float
    checkpoints: int = 0  # saves made together (same step, back to back) counted once, inside steps
    cadence: str = ""  # "4 checkpoints, every 5 steps, 340 MB each, 1.2 s each" ("" without saves in steps)


@dataclass
class SeriesSummary:
    mean: float
    oscillation: OscillationResult


@dataclass
class Utilization:
    """GPU utilization and total worker CPU over time, with the periodic-drop detector (utilization
    that keeps dropping from high to low means the GPU waits for its supply)."""

    gpu_note: str | None
    gpu_util_pct: SeriesSummary | None = None
    workers_cpu_pct: SeriesSummary | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gpu_note": self.gpu_note}
        for name in ("gpu_util_pct", "workers_cpu_pct"):
            value = getattr(self, name)
            if value is not None:  # series with too few points are left out, not null
                out[name] = to_plain(value)
        return out


@dataclass
class Trial:
    """A fix the doctor tried on the running job, and the gain it measured against the prediction."""

    fix: str  # the finding's check
    settings: dict[str, Any]
    steps: int  # trial steps with the fix (real optimizer updates)
    predicted_speedup: float | None
    measured_speedup: float | None
    spread: list[float]  # [low, high] of the measured speed-up
    note: str
    baseline_steps_per_s: float | None = None
    trial_steps_per_s: float | None = None
    startup_s: float | None = None  # worker start-up of the tried loader, kept out of the rate
    segments: list[TrialSegment] = field(default_factory=list)  # candidates, or the A/B stretches
    loader_type: str | None = None  # the class of the loader a loader trial built
    failed: str = ""  # why the fix failed on this job (a worker raised), in one line

    @property
    def decision(self) -> str | None:
        """``faster``, ``slower``, ``no difference`` (see ``trial_decision``) or ``failed``; None without a figure."""
        return "failed" if self.failed else trial_decision(self.measured_speedup, self.spread)

    @property
    def quote(self) -> str:
        """``measured 1.48× in a 40-step trial with num_workers=2; predicted 2.1×``, and, when the
        interval does not say faster, what that means for the fix."""
        if self.failed:
            return "the trial's workers failed on this job: make the dataset work in workers first"
        if self.measured_speedup is None:
            return ""
        what = ", ".join(f"{k}={v}" for k, v in self.settings.items() if k != "persistent_workers")
        with_ = f" with {what}" if what else ""
        predicted = f"; predicted {self.predicted_speedup:.1f}×" if self.predicted_speedup else ""
        after = {
            "slower": "; slower than unchanged: do not apply",
            "no difference": "; no clear difference from unchanged (the interval holds 1.0×)",
        }.get(self.decision or "", "")
        return f"measured {self.measured_speedup:.2f}× in a {self.steps}-step trial{with_}{predicted}{after}"


@dataclass
class Report:
    report_version: int
    target: TargetInfo
    outcome: OutcomeSummary
    verdict: Verdict
    findings: list[Finding]
    steps: StepStats
    phase_share: dict[str, float]
    phase_ms_per_step: dict[str, float]
    whatif: WhatIfResult
    dataloader: LoaderFacts | None
    dataloader_recommended: dict[str, dict[str, Any]] | None
    top_lines: list[SourceLine]
    data_wait_lines: list[SourceLine]
    transfers: TransferStats
    checkpoints: CheckpointTotals
    outside_steps_s: dict[str, float]
    utilization: Utilization
    notes: list[str]
    trials: list[Trial]
    # Each step phase's share with its 95% interval over the observed steps: {phase: [low, high]}.
    phase_share_ci: dict[str, list[float]]
    sampling: Sampling
    # Derived series the renderers plot; not part of report.json.
    breakdown: Breakdown = field(repr=False, metadata={"json": False})
    # On CUDA: how long the GPU itself waited for the host; left out of report.json when not measured.
    gpu_idle: GpuIdleSection | None = field(default=None, metadata={"omit_none": True})

    @property
    def no_findings_sentence(self) -> str:
        """What to say when nothing was found: "keeps up" only where steps were seen to keep up."""
        if not self.steps.observed:
            crashed = self.outcome.reason == "exception"
            return (
                "No findings: no training step was observed"
                + (" (the job crashed before its first step)" if crashed else "")
                + ", so nothing about the supply line can be said."
            )
        if self.verdict.bound == "input":
            # Never "input-bound" beside "keeps up": the wait was measured, no check could place it.
            return (
                "No finding with a fix: the steps wait on their input (see the verdict), but the loader "
                "they wait on was not one the doctor can judge, so no knob can be named for it."
            )
        return "No findings: the supply line keeps up."

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.metadata.get("json", True):
                value = getattr(self, f.name)
                if value is None and f.metadata.get("omit_none"):
                    continue
                out[f.name] = value.to_dict() if hasattr(value, "to_dict") else to_plain(value)
        return out


def build_report(record: RunRecord, snippets: FixSnippets | None = None) -> Report:
    """Analyse a record once. ``snippets`` writes fixes against the user's own lines (the caller
    passes ``supplyline.fixes.snippets``; analysis never imports the fixes)."""
    b = breakdown(record)
    sig = supply_signal(record)
    commands = dataset_commands(sig.loader)
    gpu = gpu_idle_result(record, b)
    findings = run_checks(Evidence(record, b, sig, commands, snippets, gpu))
    gpu_section = gpu_idle_section(record, gpu)
    share, ms = b.phase_share, b.phase_ms_per_step
    if gpu_section is not None and gpu_section.idle_share is not None:
        # Beside the CPU split, not part of it: the shares of the step phases still add up to 1.
        share = share | {P.GPU_IDLE: gpu_section.idle_share}
        ms = ms | {P.GPU_IDLE: gpu_section.idle_ms_per_step or 0.0}
    findings, trials = _trials(record, findings)
    return Report(
        report_version=REPORT_VERSION,
        target=record.target,
        outcome=OutcomeSummary(**{f.name: getattr(record.outcome, f.name) for f in fields(OutcomeSummary)}),
        verdict=verdict(
            b,
            findings,
            gpu,
            trials[0].quote if trials and _matches(trials[0], findings) else "",
            loader_seen=bool(record.loaders),
            waits_on=_wait_words(sig),
            wait_noun=_wait_noun(sig),
            trial_decision=trials[0].decision if trials and findings and trials[0].fix == findings[0].check else None,
            gil_bound=sig.gil_bound,
        ),
        findings=findings,
        steps=_step_stats(b),
        phase_share=share,
        phase_ms_per_step=ms,
        whatif=_whatif(record, b),
        dataloader=_loader_facts(sig, commands, b),
        # Nothing to recommend from when no step was seen ("the loader keeps up" would be unfounded).
        dataloader_recommended=None
        if not b.steps
        else recommended_loader(
            sig.loader,
            sig.stall,
            record.host.cpu_count,
            record.host.cuda_available,
            input_bound=any(f.check in INPUT_CHECKS for f in findings),
            measured=loader_trial(record),
        ),
        top_lines=b.top_lines,
        data_wait_lines=b.data_wait_lines,
        transfers=record.transfers,
        checkpoints=_checkpoint_totals(record),
        outside_steps_s=record.outside_steps_s,
        utilization=_utilization(record),
        notes=_notes(record, sig),
        trials=trials,
        phase_share_ci={p: [ci.low, ci.high] for p, ci in b.share_ci.items()},
        sampling=_sampling(record, b),
        breakdown=b,
        gpu_idle=gpu_section,
    )


def report_from_saved(path: str, snippets: FixSnippets | None = None) -> tuple[RunRecord, Report]:
    """Load a saved record (validated field by field on load) and analyse it."""
    record = load_record(path)
    try:
        return record, build_report(record, snippets)
    except (KeyError, IndexError, ValueError, ZeroDivisionError) as exc:  # columns that do not add up
        raise UserError(f"the run record at {path} is inconsistent ({type(exc).__name__}: {exc})") from exc


def _step_stats(b: Breakdown) -> StepStats:
    ci = None
    if len(b.durations_s) >= 3 and min(b.durations_s) > 0:
        med = median_interval(b.durations_s)
        ci = [med.low * 1e3, med.high * 1e3]
    return StepStats(
        observed=b.steps,
        warmup_excluded=b.warmup_steps_excluded,
        step_ms_median=b.step_s_median * 1e3,
        step_ms_mean=b.step_s_mean * 1e3,
        step_ms_p95=b.step_s_p95 * 1e3,
        steps_per_s=b.steps_per_s,
        samples_per_s=b.samples_per_s,
        batches_per_step=b.batches_per_step,
        step_ms_median_ci=ci,
    )


def _checkpoint_totals(record: RunRecord) -> CheckpointTotals:
    in_step = [s for s in record.saves if s.in_step]
    return CheckpointTotals(
        saves=len(record.saves),
        seconds=sum(s.duration_s for s in record.saves),
        checkpoints=len(group_checkpoints(in_step)),
        cadence=cadence(group_checkpoints(in_step)).sentence() if in_step else "",
    )


def _sampling(record: RunRecord, b: Breakdown) -> Sampling:
    note = None
    if not b.split_reliable:
        # Without enough samples the unhooked time is all counted as compute (breakdown.unhooked_split):
        # say so, so that "other 0.0%" beside it reads as what it is, not as a measured zero.
        n = b.unhooked_samples
        note = (
            f"{b.unhooked_share * 100:.0f}% of step time was timed by no hook and is counted as compute: no stack "
            f"sample landed in it to split it into compute, logging and other; {TOO_FEW_ADVICE_DOCTOR}"
            if n == 0
            else f"{b.unhooked_share * 100:.0f}% of step time was timed by no hook and is split into compute, logging "
            f"and other by {share_text(0, n, TOO_FEW_ADVICE_DOCTOR)}"
        )
    return Sampling(record.sampler.samples, b.unhooked_samples, b.unhooked_share, b.split_reliable, note)


def _whatif(record: RunRecord, b: Breakdown) -> WhatIfResult:
    w = record.whatif
    # ONE observed rate on every screen: the step line's (observed steps over their total time).
    observed = b.steps_per_s or None
    consumer = 1 / w.compute_only_step_s if w.compute_only_step_s else None
    loader = (
        w.loader_only_batches_per_s / b.batches_per_step if w.loader_only_batches_per_s and b.batches_per_step else None
    )
    durations = [record.steps["duration_s"][i] for i in observed_indices(record)[0]]
    spread = [nearest_rank(durations, q) * 1e3 for q in SPREAD_Q] if durations else None
    speedup, claim = _whatif_claim(w.compute_only_step_s, observed, spread, b.phase_share.get(P.DATA_WAIT, 0.0))
    return WhatIfResult(
        label=WHATIF_LABEL,
        enabled=w.enabled,
        ran=w.ran,
        note=w.note,
        observed_steps_per_s=observed,
        compute_only_steps_per_s=consumer,
        loader_only_steps_per_s=loader,
        consumer_bound_speedup=speedup,
        observed_step_ms_spread=spread,
        claim=claim,
    )


def _trials(record: RunRecord, findings: list[Finding]) -> tuple[list[Finding], list[Trial]]:
    """The record's trials, and the findings with each trial folded in: the finding a trial tried
    quotes its measurement next to its prediction (findings are frozen, so it is a new finding)."""
    findings = list(findings)
    out: list[Trial] = []
    for t in record.trials.trials:
        at = next((i for i, f in enumerate(findings) if f.check == t.fix), None)
        finding = findings[at] if at is not None else None
        # The user reads the finding's number: quote that one (the plan-time one when the finding is gone).
        predicted = finding.expected_speedup if finding is not None else t.predicted_speedup
        trial = Trial(
            t.fix,
            t.settings,
            t.steps,
            predicted,
            t.measured_speedup,
            t.spread,
            t.note,
            t.baseline_steps_per_s,
            t.trial_steps_per_s,
            t.startup_s,
            t.segments,
            t.loader_type,
            t.failed,
        )
        if at is not None and finding is not None and trial.quote:
            startup = f", worker start-up {t.startup_s:.2f} s kept apart" if t.startup_s is not None else ""
            spread = f" (95% interval {t.spread[0]:.2f}–{t.spread[1]:.2f}×{startup})" if len(t.spread) == 2 else ""
            evidence = f"{finding.evidence}; trial: {trial.quote}{spread}"
            findings[at] = replace(finding, measured_speedup=t.measured_speedup, evidence=evidence)
        out.append(trial)
    # The top finding's trial first: it is the one the verdict quotes.
    order: dict[str, int] = {f.check: i for i, f in enumerate(findings)}
    return findings, sorted(out, key=lambda t: order.get(t.fix, len(order)))


def _matches(trial: Trial, findings: list[Finding]) -> bool:
    return bool(findings) and findings[0].check == trial.fix and bool(trial.quote)


def _whatif_claim(
    replay_step_s: float | None, observed: float | None, spread_ms: list[float] | None, wait_share: float
) -> tuple[float | None, str]:
    """(speed-up, sentence): a speed-up is claimed only when the replayed step beats the fast end of
    the observed steps (their 10th percentile) and the step waits on data at all; a replay within
    the run's own noise, or a faster replay of a step that hardly waits (its workers competing for
    the CPU, not its input), is said as such."""
    if not replay_step_s or not observed or not spread_ms:
        return None, ""
    replay_ms = replay_step_s * 1e3
    noise = f"observed steps {spread_ms[0]:.1f}–{spread_ms[1]:.1f} ms from the 10th to the 90th percentile"
    if replay_ms >= spread_ms[0]:
        return None, (
            f"the replayed step ({replay_ms:.1f} ms) is within the {noise}: no speed-up to expect from the input side"
        )
    if wait_share < MIN_SHARE:
        return None, (
            f"the step waits on data {wait_share * 100:.0f}% of its time; the replayed step ({replay_ms:.1f} ms, "
            f"{noise}) is faster because nothing else competes for the CPU, not because of the input"
        )
    ratio = (1 / replay_step_s) / observed
    return ratio, f"a step can go at most {ratio:.2f}× faster without the input side ({noise})"


def _notes(record: RunRecord, sig: SupplySignal) -> list[str]:
    notes = list(record.notes)
    if record.whatif.ran:
        notes.append(REPLAY_NOTE)
    if not record.loaders:
        notes.append("no DataLoader was seen: data wait cannot be measured")
    elif sig.loader is None:
        notes.append("no training DataLoader was identified (no optimizer step or backward followed a batch)")
    w = record.whatif
    if w.enabled and not w.ran and w.note:
        notes.append(f"what-if skipped: {w.note}")
    tl = record.gpu_timeline
    if tl is not None and not tl.available and record.host.cuda_available and tl.note:
        notes.append(tl.note)  # on CUDA, say why GPU idle is missing; on CPU there is nothing to miss
    t = record.trials
    if t.enabled and t.note:
        notes.append(f"fix trial: {t.note}")
    return notes


def _utilization(record: RunRecord) -> Utilization:
    samples = record.monitor.samples
    times = [s.time_unix_s for s in samples]
    out = Utilization(gpu_note=record.monitor.gpu_note)
    gpu = [[g.util_pct for g in s.gpus if g.util_pct is not None] for s in samples]
    series: dict[str, list[float | None]] = {
        "gpu_util_pct": [statistics.mean(u) if u else None for u in gpu],
        "workers_cpu_pct": [sum(p.cpu_pct for p in s.processes if p.role != "root") for s in samples],
    }
    for name, values in series.items():
        pts = [(t, v) for t, v in zip(times, values) if v is not None]
        if len(pts) < 2:
            continue
        res = detect_oscillation([v for _, v in pts], timestamps=[t for t, _ in pts])
        setattr(out, name, SeriesSummary(statistics.mean(v for _, v in pts), res))
    return out


def _loader_facts(sig: SupplySignal, commands: DatasetCommands, b: Breakdown) -> LoaderFacts | None:
    loader = sig.loader
    if loader is None:
        return None
    # No stall word without a stall: workers idle because they are ahead is not a fetch stall.
    stall: Stall = sig.stall if b.phase_share.get(P.DATA_WAIT, 0.0) >= MIN_SHARE else "none"
    firsts = loader.first_batch_s
    return LoaderFacts(
        batch_size=loader.batch_size,
        num_workers=loader.num_workers,
        pin_memory=loader.pin_memory,
        prefetch_factor=loader.prefetch_factor,
        persistent_workers=loader.persistent_workers,
        multiprocessing_context=loader.multiprocessing_context,
        dataset_type=loader.dataset_type,
        dataset_len=loader.dataset_len,
        batch_bytes=loader.batch_bytes,
        epochs_started=loader.epochs_started,
        time_to_first_batch_s=firsts[0] if firsts else None,
        epoch_first_batch_s=firsts,
        stall=stall,
        worker_cpu_pct_mean=sig.worker_cpu_pct_mean,
        host_cpu_busy_pct_mean=sig.host_cpu_busy_pct_mean,
        tune_command=commands.tune_command,
        preprocess_command=commands.preprocess_command,
        loader_type=loader.loader_type,
        dataset_shards=loader.dataset_shards,
        dataset_knobs=dict(loader.dataset_knobs),
        loader_module=loader.loader_module,
        worker_method=loader.worker_method,
    )


def _wait_words(sig: SupplySignal) -> str:
    loader = sig.loader
    return wait_words(loader.loader_type, loader.loader_module) if loader is not None else ""


def _wait_noun(sig: SupplySignal) -> str:
    loader = sig.loader
    return wait_name(loader.loader_type, loader.loader_module) if loader is not None else "the DataLoader wait"


def dataset_commands(loader: LoaderInfo | None) -> DatasetCommands:
    """The exact `supplyline tune` / `supplyline preprocess` commands for the training dataset,
    when the doctor could name it as an importable MODULE:ATTR."""
    spec = loader.dataset_spec if loader else None
    if not loader or not spec:
        return DatasetCommands()
    quoted = shlex.quote(spec)
    batch = f" --batch-size {loader.batch_size}" if loader.batch_size else ""
    return DatasetCommands(f"supplyline tune {quoted}{batch}", f"supplyline preprocess {quoted}")
