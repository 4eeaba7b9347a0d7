"""Where the observed steps' time went: phase totals and shares, step-time statistics, top lines.

Pure functions of a RunRecord. Hooks measure data wait, transfer, logging, checkpoint and the
backward/optimizer part of compute directly; the rest of each step ("unhooked") is split by the
stack sampler's samples: inside torch's module/autograd/optimizer code = compute, on a line of the
user's code that writes or prints = logging, anywhere else in the user's code = other.
"""

from __future__ import annotations

import linecache
import re
import statistics
from dataclasses import dataclass, field, replace

from supplyline import phases as P
from supplyline.analyze.stats import MIN_SHARE_SAMPLES, Interval, ratio_interval, share_is_reliable
from supplyline.collect.events import LineSample
from supplyline.record import RunRecord

MIN_SPLIT_SHARE = 0.05
_IO_LINE = re.compile(r"\.write\(|\.flush\(|fsync\(|fdatasync\(|print\(|\.writelines\(|logging\.|logger\.")


@dataclass
class SourceLine:
    """A line of code with its share of observed step time (from the stack sampler)."""

    file: str
    line: int
    function: str
    phase: str
    code: str
    share_of_step_time: float
    # Data wait with num_workers=0: the library function this line runs ("file:line:function"), where
    # the loading time goes (a transform's PIL call, numpy); empty when the time is in the user's own code.
    library: str = ""
    samples: int = 0  # stack samples on this line
    total_samples: int = 0  # stack samples inside observed steps: the share is samples / total_samples

    @property
    def reliable(self) -> bool:
        """Enough samples to print the share as a number (the rule is ``stats.share_is_reliable``)."""
        return share_is_reliable(self.samples, self.total_samples)


@dataclass
class Breakdown:
    steps: int
    warmup_steps_excluded: int
    total_s: float
    step_s_median: float
    step_s_mean: float
    step_s_p95: float
    steps_per_s: float
    samples_per_s: float | None
    batches_per_step: float
    phase_s: dict[str, float]
    phase_share: dict[str, float]
    per_step_phase_s: dict[str, list[float]]
    top_lines: list[SourceLine] = field(default_factory=list)
    data_wait_lines: list[SourceLine] = field(default_factory=list)
    phase_lines: dict[str, list[SourceLine]] = field(default_factory=dict)
    # Each partition phase's share with its 95% interval over the observed steps (stats.ratio_interval);
    # the sampled phases' intervals also allow for a split that rests on too few stack samples.
    share_ci: dict[str, Interval] = field(default_factory=dict)
    durations_s: list[float] = field(default_factory=list)  # the observed steps' wall times
    unhooked_share: float = 0.0  # share of step time no hook timed, split by the stack sampler
    unhooked_samples: int = 0  # the stack samples that split it

    @property
    def split_reliable(self) -> bool:
        """Whether the compute / logging / other split of the unhooked time rests on enough samples.
        Below 5% of step time the split cannot move a share by more than the noise anyway."""
        return self.unhooked_share < MIN_SPLIT_SHARE or self.unhooked_samples >= MIN_SHARE_SAMPLES

    @property
    def phase_ms_per_step(self) -> dict[str, float]:
        return {p: v / self.steps * 1e3 if self.steps else 0.0 for p, v in self.phase_s.items()}


def source_line(file: str, line: int) -> str:
    return linecache.getline(file, line).strip()


def nearest_rank(values: list[float], fraction: float) -> float:
    """The value at ``fraction`` (0..1) of the sorted values, not interpolated (a step time that
    happened); 0.0 for none. ``collect.summary.percentile`` is the interpolated one, q in 0..100."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[k]


def observed_indices(record: RunRecord) -> tuple[list[int], int]:
    """Observed steps, without the first one when there are enough (it carries worker start-up)."""
    idx = record.observed_steps
    warm = 1 if len(idx) >= 5 else 0
    return idx[warm:], warm


def unhooked_split(record: RunRecord) -> dict[str, float]:
    """Fractions of unhooked time that are compute, logging and other, from the stack samples."""
    counts: dict[str, int] = {P.COMPUTE: 0, P.LOGGING: 0, P.OTHER: 0}
    for s in record.line_samples:
        if s.phase != "unhooked":
            continue
        counts[_classify(s)] += s.samples
    total = sum(counts.values())
    if total == 0:
        return {P.COMPUTE: 1.0, P.LOGGING: 0.0, P.OTHER: 0.0}
    return {k: v / total for k, v in counts.items()}


def _classify(sample: LineSample) -> str:
    if sample.category == "torch":
        return P.COMPUTE
    if _IO_LINE.search(source_line(sample.file, sample.line)):
        return P.LOGGING
    return P.OTHER


def breakdown(record: RunRecord) -> Breakdown:
    idx, warm = observed_indices(record)
    st = record.steps
    split = unhooked_split(record)
    per_step: dict[str, list[float]] = {p: [] for p in P.PHASE_ORDER}
    rests: list[float] = []  # per step, the time no hook timed
    no_collectives = [0.0] * len(st["duration_s"])  # records written before the collective phase existed
    for i in idx:
        hooked = {p: st.get(f"{p}_s", no_collectives)[i] for p in P.CLOCK_PHASES}
        rest = max(0.0, st["duration_s"][i] - sum(hooked.values()))
        rests.append(rest)
        for phase in P.STEP_PHASES:
            if phase.hooked:
                per_step[phase.name].append(hooked[phase.name])
        # The unhooked rest of the step is split by where the stack sampler found the thread.
        per_step[P.LOGGING][-1] += rest * split[P.LOGGING]
        per_step[P.COMPUTE].append(hooked[P.COMPUTE_HOOKED] + rest * split[P.COMPUTE])
        per_step[P.OTHER].append(rest * split[P.OTHER])
    durations = [st["duration_s"][i] for i in idx]
    total = sum(durations)
    phase_s = {p: sum(v) for p, v in per_step.items()}
    share = {p: (v / total if total > 0 else 0.0) for p, v in phase_s.items()}
    batches = [st["batches"][i] for i in idx]
    batch_size = train_batch_size(record)
    mean_batches = statistics.mean(batches) if batches else 0.0
    step_median = statistics.median(durations) if durations else 0.0
    steps_per_s = len(durations) / total if total > 0 else 0.0
    samples_per_s = steps_per_s * mean_batches * batch_size if batch_size and mean_batches else None
    b = Breakdown(
        steps=len(idx),
        warmup_steps_excluded=warm,
        total_s=total,
        step_s_median=step_median,
        step_s_mean=(total / len(durations) if durations else 0.0),
        step_s_p95=nearest_rank(durations, 0.95),
        steps_per_s=steps_per_s,
        samples_per_s=samples_per_s,
        batches_per_step=mean_batches,
        phase_s=phase_s,
        phase_share=share,
        per_step_phase_s=per_step,
    )
    b.durations_s = durations
    b.unhooked_share = sum(rests) / total if total > 0 else 0.0
    b.unhooked_samples = sum(s.samples for s in record.line_samples if s.phase == "unhooked")
    hooked_logging = [st.get(f"{P.LOGGING}_s", no_collectives)[i] for i in idx]
    b.share_ci = _share_intervals(b, durations, hooked_logging)
    _attach_lines(record, b)
    return b


def _share_intervals(b: Breakdown, durations: list[float], hooked_logging: list[float]) -> dict[str, Interval]:
    """Per phase: the share's interval over steps. When the sampled split is unreliable, a sampled
    phase may truly hold none of the unhooked time (logging: only its hooked part; other: zero)."""
    out = {p: ratio_interval(values, durations) for p, values in b.per_step_phase_s.items()}
    if not b.split_reliable and sum(durations) > 0:
        hooked_share = sum(hooked_logging) / sum(durations)
        for phase, floor in ((P.LOGGING, hooked_share), (P.OTHER, 0.0), (P.COMPUTE, 0.0)):
            ci = out.get(phase)
            if ci is not None:
                high = max(ci.high, min(1.0, ci.estimate + b.unhooked_share))
                out[phase] = replace(ci, low=min(ci.low, floor), high=high)
    return out


def train_batch_size(record: RunRecord) -> int | None:
    loader = record.train_loader
    return loader.batch_size if loader else None


def _attach_lines(record: RunRecord, b: Breakdown) -> None:
    """Top source lines per phase, each with its share of observed step time."""
    in_steps = sum(s.samples for s in record.line_samples)
    if in_steps == 0:
        return
    by_phase: dict[str, list[SourceLine]] = {}
    merged: dict[tuple[str, str, int, str], SourceLine] = {}
    for s in record.line_samples:
        kind = _classify(s) if s.phase == "unhooked" else s.phase
        # One line once per phase and library entry, whichever function or category the samples named.
        key = (kind, s.file, s.line, s.library)
        if key in merged:
            merged[key].share_of_step_time += s.samples / in_steps
            merged[key].samples += s.samples
            continue
        entry = SourceLine(
            s.file, s.line, s.function, kind, source_line(s.file, s.line), s.samples / in_steps, s.library
        )
        entry.samples, entry.total_samples = s.samples, in_steps
        merged[key] = entry
        by_phase.setdefault(kind, []).append(entry)
    for entries in by_phase.values():
        entries.sort(key=lambda e: -e.share_of_step_time)
    b.phase_lines = {k: v[:5] for k, v in by_phase.items()}
    own_code = (e for k in (P.OTHER, P.LOGGING) for e in by_phase.get(k, []))
    b.top_lines = sorted(own_code, key=lambda e: -e.share_of_step_time)[:8]
    b.data_wait_lines = by_phase.get(P.DATA_WAIT, [])[:5]
