"""The checks: one small rule per checkpoint of the supply line, each with its evidence (what was
measured), its fix (what to change) and the speed-up to expect.

Every check has one signature, ``Evidence -> list[Finding]``, and is listed once in ``CHECKS``;
adding a check is one function plus one line there (docs/contributing.md). Checks are pure: they
read the record and what analysis derived from it, and never import the fixes or the tools — the
caller passes the fix snippets in (``Evidence.snippets``).
"""

from __future__ import annotations

import linecache
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol

from supplyline import phases as P
from supplyline.analyze.breakdown import Breakdown, SourceLine
from supplyline.analyze.capacity import Pipeline, batch_rate, explain, intra_op_cores, oversubscribed
from supplyline.analyze.gpu_idle import GpuIdleResult
from supplyline.analyze.recommend import (
    fetch_stall_workers,
    prep_stall_workers,
    shard_cap,
    shards_note,
    streaming_note,
)
from supplyline.analyze.speedup import (
    SNAPSHOT_BYTES_PER_S,
    InputModel,
    background_save_speedup,
    input_speedup,
    removal_speedup,
)
from supplyline.analyze.supply import SupplySignal
from supplyline.analyze.trial_result import LoaderTrial, loader_trial, measured_trial
from supplyline.collect.checkpoints import Cadence, cadence, group_checkpoints
from supplyline.collect.events import LoaderInfo, is_loop
from supplyline.record import RunRecord

CheckName = Literal["dataloader", "storage", "transfer", "logging", "checkpoint", "preprocessing", "host"]
Severity = Literal["high", "medium", "low"]


@dataclass(frozen=True)
class CheckSpec:
    """What a finding's name stands for: the step phase its share is of (its noise test; None: a
    finding without a share of the step, the host's), and whether it is about the input pipeline
    (the verdict's "input-bound" needs one of those)."""

    name: CheckName
    phase: P.PhaseName | None
    is_input: bool


# The one table of findings; INPUT_CHECKS and CHECK_PHASE are read off it, and a test holds it to
# CheckName. The check functions that produce them run in CHECKS' order (input_check makes the three
# input findings).
CHECK_SPECS: tuple[CheckSpec, ...] = (
    CheckSpec("dataloader", P.DATA_WAIT, True),
    CheckSpec("storage", P.DATA_WAIT, True),
    CheckSpec("preprocessing", P.DATA_WAIT, True),
    CheckSpec("transfer", P.TRANSFER, False),
    CheckSpec("logging", P.LOGGING, False),
    CheckSpec("checkpoint", P.CHECKPOINT, False),
    CheckSpec("host", None, False),
)
INPUT_CHECKS: frozenset[CheckName] = frozenset(s.name for s in CHECK_SPECS if s.is_input)
MIN_SHARE = 0.05  # below 5% of step time a phase is not worth a finding
NOISE_ZONE = 2.0  # shares under 2 × MIN_SHARE must clear the floor with their interval
MIN_PROMISE = 1.05  # a predicted speed-up below this is no promise: the finding says "no gain expected"
SEVERITY_RANK: dict[Severity, int] = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class Finding:
    check: CheckName
    severity: Severity
    share_of_step_time: float
    evidence: str
    fix: str
    expected_speedup: float | None
    # What the finding is made of, when it has several causes (the input finding: loader settings,
    # per-sample CPU, storage); one gain for all of them.
    causes: list[str] = field(default_factory=list)
    measured_speedup: float | None = None  # from the doctor's fix trial, when one ran
    # The gain at the two ends of the share's 95% interval (see ``noise_checked``); null when no gain.
    expected_speedup_range: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def spread_is_wide(self) -> bool:
        """Whether the gain's interval is wide enough to state (the ends differ by more than 20%)."""
        r = self.expected_speedup_range
        return bool(r) and r is not None and r[1] > 1.2 * r[0]

    def gain_text(self) -> str:
        """'2.1×', or '2.1× (1.7–2.6×)' when the spread is wide."""
        if not self.expected_speedup:
            return ""
        r = self.expected_speedup_range
        spread = f" ({r[0]:.1f}–{r[1]:.1f}×)" if self.spread_is_wide and r else ""
        return f"{self.expected_speedup:.1f}×{spread}"


Frames = Iterable[str | Mapping[str, object]]


class FixSnippets(Protocol):
    """Writes the change for the user's own line, in the terms of the framework that runs the loop
    (``supplyline.fixes.snippets`` does)."""

    def framework_of(self, frames: Frames) -> str: ...

    def logging_fix_snippet(self, line: str, frames: Frames = ...) -> str: ...

    def checkpoint_fix_snippet(self, line: str, frames: Frames = ..., every_steps: int | None = ...) -> str: ...

    def dataloader_fix_snippet(self, frames: Frames, num_workers: int, prefetch_factor: int | None = ...) -> str: ...

    def save_less_often_snippet(
        self, line: str, guard: str = ..., frames: Frames = ..., every_steps: int | None = ...
    ) -> str: ...


@dataclass(frozen=True)
class DatasetCommands:
    """The exact tool commands for the training dataset, when the doctor could name it."""

    tune_command: str | None = None
    preprocess_command: str | None = None


@dataclass(frozen=True)
class Evidence:
    """Everything a check may read."""

    record: RunRecord
    breakdown: Breakdown
    supply: SupplySignal
    commands: DatasetCommands = field(default_factory=DatasetCommands)
    snippets: FixSnippets | None = None
    gpu: GpuIdleResult | None = None  # on CUDA: GPU idle time by host phase (analyze/gpu_report.py)


@dataclass(frozen=True)
class Judged:
    """The share a finding is judged on: the GPU's idle time under a host phase when CUDA events
    measured it, else the CPU-side time in that phase. ``beside`` puts the other side next to it."""

    share: float
    cpu_share: float
    on_gpu: bool
    beside: str  # "" on CPU


AHEAD_SHOWN_S = 0.0005  # a lead under half a millisecond is noise, not "the CPU ran ahead"


def judged_share(ev: Evidence, phase: str) -> Judged:
    """GPU idle share under ``phase`` on CUDA (the CPU's wait overlaps kernels still running when
    it runs ahead, so the CPU share can say "input-bound" while the GPU was busy), else the CPU share."""
    cpu = ev.breakdown.phase_share.get(phase, 0.0)
    g = ev.gpu
    if g is None or g.idle_share is None or g.wall_s <= 0:
        return Judged(cpu, cpu, False, "")
    share = g.by_phase.get(phase, 0.0) / g.wall_s
    text = f"; the GPU sat idle {share * 100:.0f}% of the time waiting for it (CPU-side: {cpu * 100:.0f}%"
    if abs(cpu - share) >= MIN_SHARE and g.cpu_ahead_s_median is not None and g.cpu_ahead_s_median >= AHEAD_SHOWN_S:
        text += f"; the CPU ran ahead by {g.cpu_ahead_s_median * 1e3:.1f} ms"
    return Judged(share, cpu, True, text + ")")


Check = Callable[[Evidence], list[Finding]]


def severity(share: float) -> Severity:
    return "high" if share >= 0.30 else "medium" if share >= 0.10 else "low"


def effective_workers(sig: SupplySignal) -> int:
    """The loader's workers as the CPU sees them: thread workers the GIL holds run one at a time."""
    if sig.loader is None:
        return 0
    nw = shard_cap(sig.loader.num_workers, sig.loader)  # workers past the last shard stop
    return min(1, nw) if sig.gil_bound else nw


NODES_BY_HAND = (
    "Change it in the script: the doctor cannot try it in-process nor `supplyline run` apply it, because a "
    "torchdata.nodes pipeline's workers live in its ParallelMapper node, built by your code."
)


LOOP_BY_HAND = (
    "Change it in the script: the doctor cannot try it in-process nor `supplyline run` apply it, because the "
    "loop builds its batches in your own code, with no loader object to rebuild."
)


def by_hand(loader: LoaderInfo | None) -> str:
    """Why the doctor cannot try or apply a loader change itself, or "" where it can."""
    return NODES_BY_HAND if is_nodes(loader) else LOOP_BY_HAND if is_loop(loader) else ""


def is_nodes(loader: LoaderInfo | None) -> bool:
    """A torchdata.nodes pipeline: its knobs sit on its nodes (collect/nodes.py), not on a DataLoader."""
    return loader is not None and loader.loader_module.startswith("torchdata.nodes")


def input_model(ev: Evidence) -> InputModel:
    b, w = ev.breakdown, ev.record.whatif
    # Throughput is total time over steps: with several workers batches arrive in bursts (one step
    # waits a whole batch, the next finds one ready), and the median step would hide the waits.
    return InputModel(
        step_s=b.step_s_mean,
        wait_share=judged_share(ev, P.DATA_WAIT).share,
        batches_per_step=b.batches_per_step,
        cores=ev.record.host.cpu_count,
        compute_only_step_s=w.compute_only_step_s if w.ran else None,
        loader_only_batches_per_s=w.loader_only_batches_per_s if w.ran else None,
    )


def _where(lines: list[SourceLine]) -> str:
    if not lines:
        return ""
    top = lines[0]
    lib = f" → {library_label(top.library)}" if top.library else ""
    # A share from a handful of samples is not a number to print (nor is the order of lines sure).
    weight = (
        f"{top.share_of_step_time * 100:.0f}% of step time"
        if top.reliable
        else f"{top.samples} of {top.total_samples} samples: too few to be sure"
    )
    return f" — {os.path.basename(top.file)}:{top.line} `{top.code}`{lib} ({weight})"


def library_label(frame: str) -> str:
    """``/…/site-packages/PIL/Image.py:1234:filter`` -> ``PIL/Image.py:filter``: the library function
    a user's line runs, short enough for a table cell."""
    path, _, rest = frame.rpartition(":")  # rest: the function
    path = path.rpartition(":")[0] or path  # drop the line number
    parts = path.replace(os.sep, "/").split("/")
    return f"{'/'.join(parts[-2:])}:{rest}"


def loading_lines(lines: list[SourceLine], iter_stack: list[str]) -> list[SourceLine]:
    """Data-wait lines with the line that iterates the loader (``for x, y in loader:``) put last: its
    samples are the DataLoader's own machinery, while the lines below it (the dataset, its
    transforms, the library calls they make) say where the loading time goes."""
    iterating = {(parts[0], parts[1]) for parts in map(_split_frame, iter_stack) if parts}
    inside = [x for x in lines if (x.file, x.line) not in iterating]
    return inside + [x for x in lines if (x.file, x.line) in iterating]


def job_frames(record: RunRecord) -> list[str]:
    """The stacks that say who runs the loop: the training loader's first iteration and each save's caller."""
    loader = record.train_loader
    frames = list(loader.iter_stack) if loader else []
    for save in record.saves:
        frames += save.stack or ([save.caller] if save.caller else [])
    return frames


def _framework(ev: Evidence) -> str:
    return ev.snippets.framework_of(job_frames(ev.record)) if ev.snippets else "plain"


def input_pipeline(ev: Evidence) -> Pipeline | None:
    """The input pipeline's per-batch costs as this run measured them, for the capacity model."""
    b, record, loader = ev.breakdown, ev.record, ev.supply.loader
    bps = b.batches_per_step
    if loader is None or not bps or not b.step_s_mean:
        return None
    nw, w = effective_workers(ev.supply), record.whatif
    wait_s = b.step_s_mean * b.phase_share[P.DATA_WAIT]  # the mean: see input_model
    step_wall = (w.compute_only_step_s if w.ran and w.compute_only_step_s else b.step_s_mean - wait_s) / bps
    if w.ran and w.loader_only_batches_per_s:
        batch_wall = max(nw, 1) / w.loader_only_batches_per_s
    elif nw == 0:
        batch_wall = wait_s / bps
    else:
        return None
    observed = record.observed_steps
    cpu = [record.steps["cpu_s"][i] for i in observed] if "cpu_s" in record.steps else []
    wait_cpu = [record.steps[f"{P.DATA_WAIT}_cpu_s"][i] for i in observed] if cpu else []
    step_cpu = max(sum(cpu) - sum(wait_cpu), 0.0) / len(cpu) / bps if cpu else step_wall
    # A fetch stall leaves workers idle while they wait on reads; a prep stall keeps them on the CPU.
    batch_cpu = 0.1 * batch_wall if ev.supply.stall == "fetch" else batch_wall
    # What torch's intra-op threads add to each step, per batch (the thread CPU above counts only
    # the training thread): a conv net on every core then competes with the workers for them.
    intra = ev.supply.intra_op_cores or 0.0
    return Pipeline(
        cores=record.host.cpu_count,
        batch_wall_s=batch_wall,
        batch_cpu_s=batch_cpu,
        step_wall_s=min(step_wall, batch_wall * 1e3),
        step_cpu_s=min(step_cpu, step_wall),
        # at most the other cores through the step's own compute: a monitor sample that caught the
        # workers' start-up in the training process must not read as dozens of busy threads
        step_intra_cpu_s=min(intra * b.step_s_mean / bps, step_wall * max(record.host.cpu_count - 1, 0)),
        batch_bytes=float(loader.batch_bytes or 0),
        other_cores_busy=ev.supply.other_cores_busy,
    )


def _capacity(ev: Evidence, p: Pipeline | None, before: int, after: int) -> tuple[str, float | None]:
    """Which resource caps the rate when more workers stop helping, and the model's own gain."""
    if p is None:
        return "", None
    top = max(after, before, 2 * p.cores) * (2 if ev.supply.stall == "fetch" else 1)
    why = explain(p, list(range(0, int(top) + 1)))
    now = batch_rate(p, before)
    return (f" {why[0].upper()}{why[1:]}." if why else ""), (batch_rate(p, after) / now if now else None)


def _promise(gain: float, capacity_gain: float | None) -> float | None:
    """The smaller of the two models' gains: the what-if bound knows the consumer's real rate, the
    capacity model knows what the workers cost the cores the step shares (and what others take).
    A gain in the wrong direction is never promised: under ``MIN_PROMISE``, none."""
    if capacity_gain is not None:
        gain = min(gain, capacity_gain)
    return gain if gain >= MIN_PROMISE else None


def input_check(ev: Evidence) -> list[Finding]:
    """ONE finding for the input side, whatever its causes: the loader's settings, the per-sample CPU
    work, the storage. They share one wait and one gain, so they are listed inside it, not as
    findings whose speed-ups would read as additive."""
    b, sig, record = ev.breakdown, ev.supply, ev.record
    judged = judged_share(ev, P.DATA_WAIT)
    share = judged.share
    loader = sig.loader
    if share < MIN_SHARE or loader is None:
        return []
    cores = record.host.cpu_count
    wait_ms = b.phase_ms_per_step[P.DATA_WAIT]
    waits = (
        f"spends {wait_ms:.1f} ms building its batch in the training loop, between the update and the forward"
        if is_loop(loader)
        else f"waits {wait_ms:.1f} ms on the {loader.loader_type}"
    )
    base = f"the training step {waits} ({judged.cpu_share * 100:.0f}% of step time){judged.beside}"
    whatif = record.whatif
    if whatif.ran and whatif.compute_only_step_s:
        base += (
            f"; what-if: the consumer alone runs a step in {whatif.compute_only_step_s * 1e3:.1f} ms, the loader "
            f"alone delivers {whatif.loader_only_batches_per_s:.1f} batches/s"
        )
    tune_cmd = ev.commands.tune_command or "supplyline tune MODULE:ATTR"
    prep_cmd = ev.commands.preprocess_command or "supplyline preprocess MODULE:ATTR"
    model = input_model(ev)
    nw = effective_workers(sig)
    where = _where(loading_lines(b.data_wait_lines, loader.iter_stack))
    framework = _framework(ev)
    pipeline = input_pipeline(ev)
    if sig.stall == "fetch":
        more = shard_cap(fetch_stall_workers(nw, cores), loader)
        cap, capacity_gain = _capacity(ev, pipeline, nw, more)
        gain = _promise(input_speedup(model, nw, more, scales_past_cores=True), capacity_gain)
        cause = (
            f"storage: workers are idle while the trainer waits, so they wait on reads (fetch stall); {sig.evidence}"
        )
        fix = (
            f"Reads are latency-bound: raise num_workers beyond the core count (try "
            f"{_loader_setting(ev, framework, more, 4)}), pack small files into shards "
            f"(`supplyline pack`), or stage the dataset in RAM (`supplyline stage`); diagnose the storage "
            f"with `supplyline disk DATA_DIR`."
        )
        if gain is None:
            fix = f"No gain expected from more workers here.{cap} " + fix
        measured = loader_trial(record)
        if measured is not None and measured.workers is not None:
            fix = (
                _measured_fix(ev, framework, measured, "", instead="the time each read takes")
                + " Or pack small files into shards (`supplyline pack`), or stage the dataset in RAM "
                "(`supplyline stage`); diagnose the storage with `supplyline disk DATA_DIR`."
            )
        fix += shards_note(loader, fetch_stall_workers(nw, cores)) + streaming_note(loader)
        return [Finding("storage", severity(share), share, f"{base}{where}; cause: {cause}", fix, gain, [cause])]
    suggested = shard_cap(prep_stall_workers(nw, cores), loader)
    cap, capacity_gain = _capacity(ev, pipeline, nw, max(suggested, nw))
    gain = _promise(input_speedup(model, nw, max(suggested, nw), scales_past_cores=False), capacity_gain)
    trial = loader_trial(record)
    competing = _competing_threads(pipeline, suggested)
    causes: list[str] = []
    fixes: list[str] = []
    if nw < cores:
        causes.append(f"loader settings: {sig.evidence}")
        hand = by_hand(loader)
        measure = f" {hand}" if hand else f" Measure the best settings on your data: `{tune_cmd}`."
        if trial is not None and trial.workers is not None:
            # The trial measured it on this job: its count, its figure; the model's cap would only contradict it.
            fixes.append(_measured_fix(ev, framework, trial, measure))
        else:
            hint = f" The {competing}." if competing else ""
            fixes.append(
                f"Build the batches ahead of the step in {suggested} worker processes: "
                f"{_loader_setting(ev, framework, suggested, 4)}.{LOOP_ALTERNATIVES}{cap}{hint}{measure}"
                if gain is not None and is_loop(loader)
                else f"Load batches in parallel: {_loader_setting(ev, framework, suggested, 4)}; the per-sample work "
                f"then runs in {suggested} processes beside the training step.{cap}{hint}{measure}"
                if gain is not None
                else f"No gain promised from more workers: the {competing}.{measure}"
                if competing
                else f"No gain expected from more workers: the input side is not what holds the step.{cap}{measure}"
            )
    if sig.stall in ("prep", "mixed") or nw >= cores:
        at = where.removeprefix(" — ") if where else ""
        detail = sig.evidence if nw >= cores else "the loading is CPU work (prep stall)"
        causes.append(f"per-sample CPU work: {detail}" + (f", most at {at}" if at else ""))
        fixes.append(
            ("" if nw < cores else f"All {cores} cores are already busy preparing data. ")
            + f"Make each sample cheaper: profile it with `{prep_cmd}` (per transform, per line, GIL check), "
            "vectorize Python loops, decode with faster libraries, cache deterministic work."
        )
    check: CheckName = "dataloader" if nw < cores else "preprocessing"
    numbered = len(fixes) > 1
    if fixes:  # the shards cap the loader item (the first), where the worker count is
        fixes[0] += shards_note(loader, prep_stall_workers(nw, cores))
    fix = " ".join(f"({i}) {f}" if numbered else f for i, f in enumerate(fixes, 1))
    named = any(c.startswith("per-sample CPU work") for c in causes)  # it names the line already
    evidence = f"{base}{'' if named else where}; " + ("causes: " if len(causes) > 1 else "cause: ") + "; ".join(causes)
    return [Finding(check, severity(share), share, evidence, fix, gain, causes)]


def _competing_threads(p: Pipeline | None, workers: int) -> str:
    """Why ``workers`` would compete with the model's own intra-op threads for the cores, or "".

    On few cores a step that runs torch's intra-op threads (a conv net) slows down when workers
    take cores from it: pytorch/examples dcgan with 3 workers on 2 cores ran 0.84-0.93x where the
    old model had promised 1.2x. The capacity model prices it (the ``threads`` cap); this says why."""
    if p is None or not oversubscribed(p, workers):
        return ""
    busy = 1 + intra_op_cores(p)
    return (
        f"training step keeps {busy:.1f} of the {p.cores:g} cores busy itself (torch's intra-op threads), "
        f"so {workers} worker(s) take cores from the model's own threads and can make the step slower; "
        f"try them with `torch.set_num_threads({max(1, int(p.cores) - workers)})` and let the doctor's trial measure"
    )


def _measured_fix(
    ev: Evidence, framework: str, trial: LoaderTrial, measure: str, instead: str = "the per-sample work"
) -> str:
    """The loader fix in the words of the doctor's trial, which measured it on this job."""
    workers = trial.workers or 0
    prefetch = trial.settings.get("prefetch_factor")
    setting = _loader_setting(ev, framework, workers, prefetch if isinstance(prefetch, int) else 2)
    if trial.decision == "failed":
        return (
            f"Make the dataset work in DataLoader workers first: the doctor's trial ran num_workers={workers} on "
            f"this job and {trial.failed}. Open files, handles and connections in `__getitem__` or a "
            f"`worker_init_fn`, not in `__init__`; then load batches in parallel: {setting}.{measure}"
        )
    if trial.decision == "faster":
        return (
            f"Load batches in parallel: {setting}; the doctor's trial measured it on this job at "
            f"{trial.figure}.{measure}"
        )
    return (
        f"No gain measured from more workers: the doctor's trial ran num_workers={workers} on this job at "
        f"{trial.figure} ({trial.decision}); {instead} is what to make cheaper.{measure}"
    )


def _loader_setting(ev: Evidence, framework: str, workers: int, prefetch: int) -> str:
    """The DataLoader change in the terms of whoever builds the loader (a Trainer, Lightning, the user),
    written with the loader's own class: a ``StatefulDataLoader`` takes the same settings."""
    loader = ev.supply.loader
    if is_loop(loader):
        return _loop_setting(ev, workers, prefetch)
    if is_nodes(loader):
        method = (
            "process" if ev.supply.gil_bound or (loader is not None and loader.worker_method == "process") else "thread"
        )
        return (
            f'ParallelMapper(..., num_workers={workers}, method="{method}") and Prefetcher(..., '
            f"prefetch_factor={prefetch})"
        )
    if ev.snippets is not None and framework != "plain":
        return ev.snippets.dataloader_fix_snippet(job_frames(ev.record), workers, prefetch)
    persistent = "" if loader is None or loader.persistent_workers or workers == 0 else ", persistent_workers=True"
    kind = loader.loader_type if loader is not None else "DataLoader"
    return f"{kind}(..., num_workers={workers}{persistent}, prefetch_factor={prefetch})"


def _loop_setting(ev: Evidence, workers: int, prefetch: int) -> str:
    """Workers for a loop that builds its own batches: its batch function inside a DataLoader."""
    fn = _batch_function(ev)
    return (
        f"yield `{fn}(...)` from an IterableDataset and take the batches from a DataLoader(batch_size=None, "
        f"num_workers={workers}, persistent_workers=True, prefetch_factor={prefetch})"
    )


LOOP_ALTERNATIVES = (
    " Seed each worker's RNG from `get_worker_info().id`, or every worker draws the same batches. Where building "
    "a batch mostly waits on reads, a background thread that fills a `queue.Queue(maxsize=2)` is enough; a "
    "torchdata.nodes pipeline (`IterableWrapper` → `ParallelMapper` → `Prefetcher`) gives either."
)


def _batch_function(ev: Evidence) -> str:
    """The user's function that builds the batch: the innermost user function of the top data-wait
    line that is not the loop itself (``get_batch``), else a placeholder."""
    loader = ev.supply.loader
    loop_fns = {parts[2] for parts in map(_split_frame, loader.iter_stack if loader else []) if parts}
    for line in ev.breakdown.data_wait_lines:
        if line.function and line.function not in loop_fns and not line.function.startswith("<"):
            return line.function
    return "get_batch"


def logging_check(ev: Evidence) -> list[Finding]:
    b, record = ev.breakdown, ev.record
    judged = judged_share(ev, P.LOGGING)
    share = judged.share
    if share < MIN_SHARE:
        return []
    lines = b.phase_lines.get(P.LOGGING, [])
    per_step = record.logging_calls / max(len(record.observed_steps), 1)
    text = (
        f"{b.phase_ms_per_step[P.LOGGING]:.1f} ms per step is spent printing, logging or writing "
        f"synchronously on the training thread ({per_step:.1f} print/log calls per step)"
        + judged.beside
        + _where(lines)
    )
    code = lines[0].code if lines else ""
    frames: list[str | Mapping[str, object]] = [*job_frames(record), *({"file": line.file} for line in lines)]
    fix = _snippet(lambda s: s.logging_fix_snippet(code, frames), ev)
    if fix is None and "print(" in code:
        # print() is not logging: only making stdout writes asynchronous (or printing less) helps it.
        fix = (
            "Print every N steps, and queue stdout writes on a background thread: "
            "`from supplyline.fixes import async_stdout; async_stdout()` once before the training loop."
        )
    fix = fix or (
        "Log every N steps (`for_log = supplyline.fixes.every(n_steps=50)`), and move handlers off the training "
        "thread with `supplyline.fixes.async_logging()`; never fsync a log inside the loop."
    )
    return [Finding("logging", severity(share), share, text, fix, removal_speedup(share))]


def checkpoint_check(ev: Evidence) -> list[Finding]:
    b, record = ev.breakdown, ev.record
    judged = judged_share(ev, P.CHECKPOINT)
    share = judged.share
    if share < MIN_SHARE:
        return []
    saves = [s for s in record.saves if s.in_step]
    lines = b.phase_lines.get(P.CHECKPOINT, [])
    if not saves:
        return [
            Finding(
                "checkpoint",
                severity(share),
                share,
                "synchronous saves inside training steps" + judged.beside + _where(lines),
                _GENERIC_CHECKPOINT_FIX,
                removal_speedup(share),
            )
        ]
    # Several files written together (a model, its optimizer, a scheduler) are one checkpoint.
    cad = cadence(group_checkpoints(saves))
    first = saves[0]
    user = _frame_line(first.user_caller or first.caller)
    at = f" — called from {user}" if user else ""
    text = f"{cad.sentence()}, written synchronously inside training steps{judged.beside}{at}"
    every = round(cad.every_steps) if cad.every_steps else None
    # The fix is written against the frame that made the save call, never against the user's line
    # that only leads to it (a `trainer.train()`).
    caller_code = _source_of(first.caller)
    gain, why = _background_save_gain(b, cad)
    trial = measured_trial(ev.record, ("checkpoint",))
    measured_faster = trial is not None and trial.decision == "faster"  # on this job: the background save it is
    refuted = trial is not None and not measured_faster
    if trial is not None and not measured_faster:
        why = (
            f"No gain measured from saving in the background: the doctor's trial did it on this job at "
            f"{trial.figure} ({trial.decision}); save less often (or less) first."
        )
    if refuted or (gain is None and not measured_faster):
        # Saving in the background would not help: the change is the cadence, not an AsyncCheckpointer.
        guard = _guard_of(first.user_caller or first.caller, every)
        less = _snippet(
            lambda s: s.save_less_often_snippet(
                _source_of(first.user_caller or first.caller), guard, first.stack, every
            ),
            ev,
        )
        fix = f"{why}\n{less}" if less else f"{why} {_GENERIC_LESS_OFTEN}"
        return [Finding("checkpoint", severity(share), share, text, fix, gain)]
    fix = _snippet(lambda s: s.checkpoint_fix_snippet(caller_code, first.stack, every_steps=every), ev) or (
        _GENERIC_CHECKPOINT_FIX
    )
    return [Finding("checkpoint", severity(share), share, text, fix, gain)]


def _guard_of(frame: str, every: int | None) -> str:
    """The line a few lines above the save that sets its cadence (``if step % 5 == 0:``), or ""."""
    parts = _split_frame(frame)
    if not parts or not every:
        return ""
    path, lineno, _ = parts
    cadence = re.compile(rf"%\s*{every}\b")
    for above in range(lineno - 1, max(lineno - 4, 0), -1):
        code = linecache.getline(path, above)
        if cadence.search(code):
            return code.rstrip("\n")
    return ""


def _background_save_gain(b: Breakdown, cad: Cadence) -> tuple[float | None, str]:
    """The gain from saving in the background (``speedup.background_save_speedup``), or None with the
    reason when the saves come faster than they can be written beside the steps."""
    share = b.phase_share[P.CHECKPOINT]
    if cad.every_steps is None or not b.steps:  # one checkpoint: nothing says how far apart they are
        return removal_speedup(share), ""
    rest_s = b.total_s * (1.0 - share) / b.steps
    snapshot_s = (cad.bytes_each or 0.0) / SNAPSHOT_BYTES_PER_S
    gain = background_save_speedup(cad.every_steps, rest_s, cad.seconds_each, snapshot_s)
    if gain >= MIN_PROMISE:
        return gain, ""
    return None, (
        f"No gain expected from saving in the background alone: each checkpoint takes "
        f"{cad.seconds_each * 1e3:.0f} ms to write and the {cad.every_steps:.0f} steps between them only "
        f"{cad.every_steps * rest_s * 1e3:.0f} ms, so the next save would wait for the last; save less often "
        "(or less) first."
    )


_GENERIC_LESS_OFTEN = "Save every 10× as many steps (or by time, or on improvement), then save in the background."

_GENERIC_CHECKPOINT_FIX = (
    "Save in the background: `ckpt = supplyline.fixes.AsyncCheckpointer('checkpoints', keep_last=3)` then "
    "`ckpt.save(model.state_dict(), step=step)` — and save less often (by time or on improvement)."
)


def _split_frame(frame: str) -> tuple[str, int, str] | None:
    """``file:line:function`` -> its parts (None when it is not one)."""
    head, _, function = frame.rpartition(":")
    path, _, lineno = head.rpartition(":")
    return (path, int(lineno), function) if path and lineno.isdigit() else None


def _source_of(frame: str) -> str:
    parts = _split_frame(frame)
    return linecache.getline(parts[0], parts[1]).rstrip("\n") if parts else ""


def _frame_line(frame: str) -> str:
    parts = _split_frame(frame)
    if not parts:
        return ""
    code = linecache.getline(parts[0], parts[1]).strip()
    return f"{os.path.basename(parts[0])}:{parts[1]}" + (f" `{code}`" if code else "")


def transfer_check(ev: Evidence) -> list[Finding]:
    b, record = ev.breakdown, ev.record
    share = b.phase_share[P.TRANSFER]
    t = record.transfers
    syncs_per_step = record.gpu.syncs / max(len(record.observed_steps), 1)
    sync_ev = ""
    if syncs_per_step >= 1 and record.gpu.sync_lines:
        top = record.gpu.sync_lines[0]
        sync_ev = (
            f"{syncs_per_step:.1f} host-device synchronizations per step, most at "
            f"{os.path.basename(top.file)}:{top.line} ({top.count} times)"
        )
    if (share < MIN_SHARE or not t.copies) and not sync_ev:
        return []
    if not t.copies:
        fix = (
            "Read values back every N steps (`supplyline.fixes.every`) instead of calling `.item()`/`.cpu()` each step."
        )
        return [Finding("transfer", "low", share, sync_ev, fix, None)]
    gbps = t.bytes / t.seconds / 1e9 if t.seconds else 0.0
    text = (
        f"{t.copies} host-to-device copies, {t.bytes / 1e6:.0f} MB at {gbps:.1f} GB/s; "
        f"{t.pageable} from pageable memory, {t.blocking} blocking" + (f"; {sync_ev}" if sync_ev else "")
    )
    fix = (
        "Pin and overlap: DataLoader(..., pin_memory=True) and `x.to(device, non_blocking=True)`; avoid "
        "per-step `.item()`/`.cpu()` that force a sync."
    )
    return [Finding("transfer", severity(share), share, text, fix, removal_speedup(share))]


def host_check(ev: Evidence) -> list[Finding]:
    record, sig = ev.record, ev.supply
    out: list[Finding] = []
    loader = sig.loader
    cores = record.host.cpu_count
    if loader:
        nw = loader.num_workers
        threads = record.host.torch_threads
        if nw and nw + threads > 2 * cores:
            out.append(
                Finding(
                    "host",
                    "low",
                    0.0,
                    f"{nw} workers + {threads} torch threads on {cores} cores: oversubscribed",
                    f"Lower torch.set_num_threads() in the trainer or the worker count to about {cores}.",
                    None,
                )
            )
        need = (loader.batch_bytes or 0) * (loader.prefetch_factor or 0) * nw
        shm = record.host.shm_free_bytes
        if nw and shm is not None and need > shm:
            out.append(
                Finding(
                    "host",
                    "high",
                    0.0,
                    f"the prefetch queue needs ~{need / 2**20:.0f} MiB of /dev/shm but only "
                    f"{shm / 2**20:.0f} MiB is free",
                    "Enlarge /dev/shm (docker --shm-size) or lower prefetch_factor / batch size.",
                    None,
                )
            )
    if sig.swap_bytes_per_s > 1e6:
        out.append(
            Finding(
                "host",
                "medium",
                0.0,
                f"the host swapped {sig.swap_bytes_per_s / 2**20:.1f} MiB/s during training",
                "Reduce worker memory (fewer workers, smaller prefetch) or add RAM.",
                None,
            )
        )
    return out


def _snippet(make: Callable[[FixSnippets], str], ev: Evidence) -> str | None:
    """The change from supplyline.fixes, written against the user's own line."""
    if ev.snippets is None:
        return None
    try:
        return make(ev.snippets)
    except Exception:  # an odd line the snippet parser cannot read: the generic advice stands
        return None


# The registry: every check, in the order their findings are listed when severities tie.
CHECKS: tuple[Check, ...] = (input_check, transfer_check, logging_check, checkpoint_check, host_check)


# The step phase each finding's share is of, for its noise test (the host's has none).
CHECK_PHASE: dict[str, str] = {s.name: s.phase for s in CHECK_SPECS if s.phase is not None}


def noise_checked(ev: Evidence, found: list[Finding]) -> list[Finding]:
    """Drop findings below their own noise and give the rest the spread of their gain.

    A finding whose share lies near the floor (under ``NOISE_ZONE`` × ``MIN_SHARE``) is kept only
    when the lower end of its phase share's 95% interval (``Breakdown.share_ci``: over the observed
    steps, and allowing for a sampled split that rests on too few stack samples) still reaches
    ``MIN_SHARE``: a 6% share measured as 6 ± 4% is noise. Larger shares stand: a checkpoint saved
    once in 24 steps makes a spiky per-step series whose interval is wide, but its cost is real.
    On CUDA the shares are judged from GPU idle time, which has no per-step interval here: kept as is.
    The gain's range assumes the time the fix saves scales with the share: a gain g saves
    1 - 1/g of the step at share s, so at share s' it saves (1 - 1/g)·s'/s.
    """
    if ev.gpu is not None and ev.gpu.idle_share is not None:
        return found
    out = []
    for f in found:
        ci = ev.breakdown.share_ci.get(CHECK_PHASE.get(f.check, ""))
        if ci is None or f.share_of_step_time <= 0:
            out.append(f)
            continue
        if ci.low < MIN_SHARE and f.share_of_step_time < NOISE_ZONE * MIN_SHARE:
            continue  # within its own noise of the floor: not a finding
        if f.expected_speedup and ci.estimate > 0:
            saved = 1.0 - 1.0 / f.expected_speedup
            lo, hi = (removal_speedup(min(saved * end / ci.estimate, 0.95)) for end in (ci.low, ci.high))
            f = replace(f, expected_speedup_range=[max(1.0, lo), max(1.0, hi)])
        out.append(f)
    return out


def run_checks(ev: Evidence, checks: tuple[Check, ...] = CHECKS) -> list[Finding]:
    found = noise_checked(ev, [f for check in checks for f in check(ev)])
    found.sort(key=lambda f: (SEVERITY_RANK[f.severity], -f.share_of_step_time))
    return found
