"""The checks: one small rule per checkpoint of the supply line, each with its evidence (what was
measured), its fix (what to change) and the speed-up to expect.

Every check has one signature, ``Evidence -> list[Finding]``, and is listed once in ``CHECKS``;
adding a check is one function plus one line there (docs/contributing.md). Checks are pure: they
read the record and what analysis derived from it, and never import the fixes or the tools — the
caller passes the fix snippets in (``Evidence.snippets``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from supplyline import phases as P
from supplyline.analyze.breakdown import Breakdown, SourceLine
from supplyline.analyze.capacity import Pipeline, batch_rate, explain
from supplyline.analyze.gpu_idle import GpuIdleResult
from supplyline.analyze.recommend import fetch_stall_workers, prep_stall_workers
from supplyline.analyze.speedup import InputModel, input_speedup, removal_speedup
from supplyline.analyze.supply import SupplySignal
from supplyline.record import RunRecord

CheckName = Literal["dataloader", "storage", "transfer", "logging", "checkpoint", "preprocessing", "host"]
Severity = Literal["high", "medium", "low"]
INPUT_CHECKS: frozenset[CheckName] = frozenset({"dataloader", "storage", "preprocessing"})
MIN_SHARE = 0.05  # below 5% of step time a phase is not worth a finding
MIN_PROMISE = 1.05  # a predicted speed-up below this is no promise: the finding says "no gain expected"
SEVERITY_RANK: dict[Severity, int] = {"high": 0, "medium": 1, "low": 2}


@dataclass
class Finding:
    check: CheckName
    severity: Severity
    share_of_step_time: float
    evidence: str
    fix: str
    expected_speedup: float | None
    measured_speedup: float | None = None  # from the doctor's fix trial, when one ran

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class FixSnippets(Protocol):
    """Writes the two-line change for the user's own line (``supplyline.fixes.snippets`` does)."""

    def logging_fix_snippet(self, code: str) -> str: ...

    def checkpoint_fix_snippet(self, code: str) -> str: ...


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


def input_model(ev: Evidence) -> InputModel:
    b, w = ev.breakdown, ev.record.whatif
    return InputModel(
        step_s=b.step_s_median,
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
    return f" — {os.path.basename(top.file)}:{top.line} `{top.code}` ({top.share_of_step_time * 100:.0f}% of step time)"


def input_pipeline(ev: Evidence) -> Pipeline | None:
    """The input pipeline's per-batch costs as this run measured them, for the capacity model."""
    b, record, loader = ev.breakdown, ev.record, ev.supply.loader
    bps = b.batches_per_step
    if loader is None or not bps or not b.step_s_median:
        return None
    nw, w = loader.num_workers, record.whatif
    wait_s = b.step_s_median * b.phase_share[P.DATA_WAIT]
    step_wall = (w.compute_only_step_s if w.ran and w.compute_only_step_s else b.step_s_median - wait_s) / bps
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
    return Pipeline(
        cores=record.host.cpu_count,
        batch_wall_s=batch_wall,
        batch_cpu_s=batch_cpu,
        step_wall_s=min(step_wall, batch_wall * 1e3),
        step_cpu_s=min(step_cpu, step_wall),
        batch_bytes=float(loader.batch_bytes or 0),
    )


def _capacity(ev: Evidence, before: int, after: int) -> tuple[str, float | None]:
    """Which resource caps the rate when more workers stop helping, and the model's own gain."""
    p = input_pipeline(ev)
    if p is None:
        return "", None
    top = max(after, before, 2 * p.cores) * (2 if ev.supply.stall == "fetch" else 1)
    why = explain(p, list(range(0, int(top) + 1)))
    now = batch_rate(p, before)
    return (f" {why[0].upper()}{why[1:]}." if why else ""), (batch_rate(p, after) / now if now else None)


def _promise(gain: float, capacity_gain: float | None) -> float | None:
    """A gain in the wrong direction is never promised: under ``MIN_PROMISE`` by either model, none."""
    if gain < MIN_PROMISE or (capacity_gain is not None and capacity_gain < MIN_PROMISE):
        return None
    return gain


def input_check(ev: Evidence) -> list[Finding]:
    b, sig, record = ev.breakdown, ev.supply, ev.record
    judged = judged_share(ev, P.DATA_WAIT)
    share = judged.share
    loader = sig.loader
    if share < MIN_SHARE or loader is None:
        return []
    cores = record.host.cpu_count
    wait_ms = b.phase_ms_per_step[P.DATA_WAIT]
    base = (
        f"the training step waits {wait_ms:.1f} ms on the DataLoader ({judged.cpu_share * 100:.0f}% of step time)"
        f"{judged.beside}; {sig.evidence}"
    )
    whatif = record.whatif
    if whatif.ran and whatif.compute_only_step_s:
        base += (
            f"; what-if: the consumer alone runs a step in {whatif.compute_only_step_s * 1e3:.1f} ms, the loader "
            f"alone delivers {whatif.loader_only_batches_per_s:.1f} batches/s"
        )
    tune_cmd = ev.commands.tune_command or "supplyline tune MODULE:ATTR"
    prep_cmd = ev.commands.preprocess_command or "supplyline preprocess MODULE:ATTR"
    tune = f" Measure the best settings on your data: `{tune_cmd}`."
    model = input_model(ev)
    nw = loader.num_workers
    where = _where(b.data_wait_lines)
    if sig.stall == "fetch":
        more = fetch_stall_workers(nw, cores)
        cap, capacity_gain = _capacity(ev, nw, more)
        gain = _promise(input_speedup(model, nw, more, scales_past_cores=True), capacity_gain)
        fix = (
            f"Reads are latency-bound: raise num_workers beyond the core count (try "
            f"DataLoader(..., num_workers={more}, prefetch_factor=4)), pack small files into shards "
            f"(`supplyline pack`), or stage the dataset in RAM (`supplyline stage`); diagnose the storage "
            f"with `supplyline disk DATA_DIR`."
        )
        if gain is None:
            fix = f"No gain expected from more workers here.{cap} " + fix
        ev_text = base + where + ": workers are idle while the trainer waits, so they wait on reads (fetch stall)"
        return [Finding("storage", severity(share), share, ev_text, fix, gain)]
    out: list[Finding] = []
    suggested = prep_stall_workers(nw, cores)
    cap, capacity_gain = _capacity(ev, nw, max(suggested, nw))
    gain = _promise(input_speedup(model, nw, max(suggested, nw), scales_past_cores=False), capacity_gain)
    persistent = "" if loader.persistent_workers or nw == 0 else ", persistent_workers=True"
    if nw == 0 or nw < cores:
        fix = (
            f"Load batches in parallel: DataLoader(..., num_workers={suggested}{persistent}, prefetch_factor=4). "
            f"The per-sample work then runs in {suggested} processes beside the training step.{cap}" + tune
        )
        if gain is None:
            fix = f"No gain expected from more workers: the input side is not what holds the step.{cap}" + tune
        out.append(Finding("dataloader", severity(share), share, base + where, fix, gain))
    if sig.stall in ("prep", "mixed") or (nw >= cores and sig.stall != "fetch"):
        pshare = share if not out else share * 0.5
        fix = (
            f"Make each sample cheaper: profile it with `{prep_cmd}` (per transform, per "
            "line, GIL check), vectorize Python loops, decode with faster libraries, cache deterministic work."
        )
        if nw >= cores:
            fix = f"All {cores} cores are already busy preparing data. " + fix
        ev_text = (
            f"the per-sample CPU work is the bottleneck (prep stall): {sig.evidence}" + where
            if out
            else base + where + ": the per-sample CPU work is the bottleneck (prep stall)"
        )
        out.append(Finding("preprocessing", severity(pshare), share, ev_text, fix, gain))
    return out


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
    fix = _snippet(ev, "logging", lines) or (
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
    mean_ms = (sum(s.duration_s for s in saves) / len(saves) * 1e3) if saves else 0.0
    every = (len(record.observed_steps) / len(saves)) if saves else 0.0
    lines = b.phase_lines.get(P.CHECKPOINT, [])
    text = (
        f"{len(saves)} synchronous saves inside training steps, {mean_ms:.0f} ms each, about every "
        f"{every:.0f} steps" + judged.beside + _where(lines)
    )
    fix = _snippet(ev, "checkpoint", lines) or (
        "Save in the background: `ckpt = supplyline.fixes.AsyncCheckpointer('checkpoints', keep_last=3)` then "
        "`ckpt.save(model.state_dict(), step=step)` — and save less often (by time or on improvement)."
    )
    return [Finding("checkpoint", severity(share), share, text, fix, removal_speedup(share))]


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


def _snippet(ev: Evidence, kind: Literal["logging", "checkpoint"], lines: list[SourceLine]) -> str | None:
    """The two-line change from supplyline.fixes, written against the user's own line."""
    if ev.snippets is None:
        return None
    make = ev.snippets.logging_fix_snippet if kind == "logging" else ev.snippets.checkpoint_fix_snippet
    try:
        return make(lines[0].code if lines else "")
    except Exception:  # an odd line the snippet parser cannot read: the generic advice stands
        return None


# The registry: every check, in the order their findings are listed when severities tie.
CHECKS: tuple[Check, ...] = (input_check, transfer_check, logging_check, checkpoint_check, host_check)


def run_checks(ev: Evidence, checks: tuple[Check, ...] = CHECKS) -> list[Finding]:
    found = [f for check in checks for f in check(ev)]
    found.sort(key=lambda f: (SEVERITY_RANK[f.severity], -f.share_of_step_time))
    return found
