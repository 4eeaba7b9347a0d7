"""RunRecord -> findings and one verdict. One small rule per checkpoint (docs/how-it-works.md), each
with its evidence (what was measured), its fix (what to change) and the speedup to expect.

Expected speedups: with the what-if phases, fixing the input side can at best bring the step to
the consumer's own rate (compute-only replay): observed step / compute-only step. Without them, and
for logging/checkpoint/transfer, removing a phase's time gives 1 / (1 - share).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from supplyline.analyze.breakdown import Breakdown
from supplyline.analyze.recommend import fetch_stall_workers, prep_stall_workers
from supplyline.analyze.supply import SupplySignal
from supplyline.fixes import snippets
from supplyline.record import RunRecord

CHECKS = ("dataloader", "storage", "transfer", "logging", "checkpoint", "preprocessing", "host")
BOUNDS = ("input", "transfer", "logging", "checkpoint", "collective", "compute", "unknown")
MIN_SHARE = 0.05


@dataclass
class Finding:
    check: str
    severity: str  # high | medium | low
    share_of_step_time: float
    evidence: str
    fix: str
    expected_speedup: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def severity(share: float) -> str:
    return "high" if share >= 0.30 else "medium" if share >= 0.10 else "low"


def removal_speedup(share: float) -> float:
    return 1.0 / max(1.0 - share, 0.05)


def input_speedup(
    record: RunRecord, b: Breakdown, workers_before: int, workers_after: int, scales_past_cores: bool
) -> float:
    """Speedup from feeding the step faster, bounded by the consumer's own rate (what-if replay).

    The producer rate scales with the worker count (per-process rate measured by the loader-only
    drain); CPU-bound preparation stops scaling at the core count, latency-bound reads do not.
    """
    w = record.whatif
    share = b.phase_share["data_wait"]
    if not b.step_s_median or not b.batches_per_step:
        return removal_speedup(share)
    observed = 1.0 / b.step_s_median
    if w.ran and w.compute_only_step_s and w.loader_only_batches_per_s:
        consumer_step = w.compute_only_step_s
        per_process = w.loader_only_batches_per_s / b.batches_per_step / max(workers_before, 1)
    elif workers_before == 0 and 0 < share < 1:
        # No what-if, but with num_workers=0 the wait *is* one process producing a step's batches.
        wait = b.step_s_median * share
        consumer_step, per_process = b.step_s_median - wait, 1.0 / wait
    else:
        return removal_speedup(share)
    consumer = 1.0 / consumer_step
    if scales_past_cores:
        producer = per_process * max(workers_after, 1)
    else:
        # CPU-bound workers share the cores with the training step itself, which at rate r keeps
        # r * compute_step of a core busy: r = p * (cores - r * c)  =>  r = p * cores / (1 + p * c).
        cores = min(workers_after, record.host.cpu_count)
        producer = per_process * cores / (1.0 + per_process * consumer_step)
    # Never more than removing the whole wait: the observed rest of the step is the consumer's real cost.
    return max(1.0, min(min(consumer, producer) / observed, removal_speedup(share)))


def _where(lines: list[dict[str, Any]]) -> str:
    if not lines:
        return ""
    top = lines[0]
    return f" — {os.path.basename(top['file'])}:{top['line']} `{top['code']}` ({top['share_of_step_time'] * 100:.0f}% of step time)"


def input_findings(
    record: RunRecord, b: Breakdown, sig: SupplySignal, commands: dict[str, str | None]
) -> list[Finding]:
    share = b.phase_share["data_wait"]
    if share < MIN_SHARE or sig.loader is None:
        return []
    loader = sig.loader
    cores = record.host.cpu_count
    wait_ms = b.phase_s["data_wait"] / max(b.steps, 1) * 1e3
    base = (
        f"the training step waits {wait_ms:.1f} ms on the DataLoader ({share * 100:.0f}% of step time); {sig.evidence}"
    )
    whatif = record.whatif
    if whatif.ran and whatif.compute_only_step_s:
        base += (
            f"; what-if: the consumer alone runs a step in {whatif.compute_only_step_s * 1e3:.1f} ms, the loader "
            f"alone delivers {whatif.loader_only_batches_per_s:.1f} batches/s"
        )
    tune_cmd = commands.get("tune_command") or "supplyline tune MODULE:ATTR"
    prep_cmd = commands.get("preprocess_command") or "supplyline preprocess MODULE:ATTR"
    tune = f" Measure the best settings on your data: `{tune_cmd}`."
    out: list[Finding] = []
    nw = loader["num_workers"]
    if sig.stall == "fetch":
        more = fetch_stall_workers(nw, cores)
        gain = input_speedup(record, b, nw, more, scales_past_cores=True)
        out.append(
            Finding(
                "storage",
                severity(share),
                share,
                base
                + _where(b.data_wait_lines)
                + ": workers are idle while the trainer waits, so they wait on reads (fetch stall)",
                f"Reads are latency-bound: raise num_workers beyond the core count (try "
                f"DataLoader(..., num_workers={more}, prefetch_factor=4)), pack small files into shards "
                f"(`supplyline pack`), or stage the dataset in RAM (`supplyline stage`); diagnose the storage "
                f"with `supplyline disk DATA_DIR`.",
                gain,
            )
        )
        return out
    suggested = prep_stall_workers(nw, cores)
    gain = input_speedup(record, b, nw, max(suggested, nw), scales_past_cores=False)
    persistent = "" if loader["persistent_workers"] or nw == 0 else ", persistent_workers=True"
    if nw == 0 or nw < cores:
        fix = (
            f"Load batches in parallel: DataLoader(..., num_workers={suggested}{persistent}, prefetch_factor=4). "
            f"The per-sample work then runs in {suggested} processes beside the training step." + tune
        )
        out.append(Finding("dataloader", severity(share), share, base + _where(b.data_wait_lines), fix, gain))
    if sig.stall in ("prep", "mixed") or (nw >= cores and sig.stall != "fetch"):
        pshare = share if not out else share * 0.5
        fix = (
            f"Make each sample cheaper: profile it with `{prep_cmd}` (per transform, per "
            "line, GIL check), vectorize Python loops, decode with faster libraries, cache deterministic work."
        )
        if nw >= cores:
            fix = f"All {cores} cores are already busy preparing data. " + fix
        ev = (
            f"the per-sample CPU work is the bottleneck (prep stall): {sig.evidence}" + _where(b.data_wait_lines)
            if out
            else base + _where(b.data_wait_lines) + ": the per-sample CPU work is the bottleneck (prep stall)"
        )
        out.append(Finding("preprocessing", severity(pshare), share, ev, fix, gain))
    return out


def logging_finding(record: RunRecord, b: Breakdown) -> list[Finding]:
    share = b.phase_share["logging"]
    if share < MIN_SHARE:
        return []
    lines = b.phase_lines.get("logging", [])
    per_step = record.logging_calls / max(len(record.observed_steps), 1)
    ev = (
        f"{b.phase_s['logging'] / max(b.steps, 1) * 1e3:.1f} ms per step is spent printing, logging or writing "
        f"synchronously on the training thread ({per_step:.1f} print/log calls per step)" + _where(lines)
    )
    fix = _snippet(snippets.logging_fix_snippet, lines) or (
        "Log every N steps (`for_log = supplyline.fixes.every(n_steps=50)`), and move handlers off the training "
        "thread with `supplyline.fixes.async_logging()`; never fsync a log inside the loop."
    )
    return [Finding("logging", severity(share), share, ev, fix, removal_speedup(share))]


def checkpoint_finding(record: RunRecord, b: Breakdown) -> list[Finding]:
    share = b.phase_share["checkpoint"]
    if share < MIN_SHARE:
        return []
    saves = [s for s in record.saves if s["in_step"]]
    mean_ms = (sum(s["duration_s"] for s in saves) / len(saves) * 1e3) if saves else 0.0
    every = (len(record.observed_steps) / len(saves)) if saves else 0.0
    lines = b.phase_lines.get("checkpoint", [])
    ev = (
        f"{len(saves)} synchronous saves inside training steps, {mean_ms:.0f} ms each, about every "
        f"{every:.0f} steps" + _where(lines)
    )
    fix = _snippet(snippets.checkpoint_fix_snippet, lines) or (
        "Save in the background: `ckpt = supplyline.fixes.AsyncCheckpointer('checkpoints', keep_last=3)` then "
        "`ckpt.save(model.state_dict(), step=step)` — and save less often (by time or on improvement)."
    )
    return [Finding("checkpoint", severity(share), share, ev, fix, removal_speedup(share))]


def transfer_finding(record: RunRecord, b: Breakdown) -> list[Finding]:
    share = b.phase_share["transfer"]
    t = record.transfers
    syncs_per_step = record.gpu.get("syncs", 0) / max(len(record.observed_steps), 1)
    if syncs_per_step >= 1 and record.gpu.get("sync_lines"):
        top = record.gpu["sync_lines"][0]
        sync_ev = (
            f"{syncs_per_step:.1f} host-device synchronizations per step, most at "
            f"{os.path.basename(top['file'])}:{top['line']} ({top['count']} times)"
        )
    else:
        sync_ev = ""
    if (share < MIN_SHARE or not t.get("copies")) and not sync_ev:
        return []
    if not t.get("copies"):
        return [
            Finding(
                "transfer",
                "low",
                share,
                sync_ev,
                "Read values back every N steps (`supplyline.fixes.every`) "
                "instead of calling `.item()`/`.cpu()` each step.",
                None,
            )
        ]
    gbps = t["bytes"] / t["seconds"] / 1e9 if t["seconds"] else 0.0
    ev = (
        f"{t['copies']} host-to-device copies, {t['bytes'] / 1e6:.0f} MB at {gbps:.1f} GB/s; "
        f"{t['pageable']} from pageable memory, {t['blocking']} blocking" + (f"; {sync_ev}" if sync_ev else "")
    )
    fix = (
        "Pin and overlap: DataLoader(..., pin_memory=True) and `x.to(device, non_blocking=True)`; avoid "
        "per-step `.item()`/`.cpu()` that force a sync."
    )
    return [Finding("transfer", severity(share), share, ev, fix, removal_speedup(share))]


def host_findings(record: RunRecord, sig: SupplySignal) -> list[Finding]:
    out: list[Finding] = []
    loader = sig.loader
    cores = record.host.cpu_count
    if loader:
        nw = loader["num_workers"]
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
        need = (loader.get("batch_bytes") or 0) * (loader.get("prefetch_factor") or 0) * nw
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


def _snippet(make: Callable[[str], str], lines: list[dict[str, Any]]) -> str | None:
    """The two-line change from supplyline.fixes, written against the user's own line."""
    try:
        return make(lines[0]["code"] if lines else "")
    except Exception:  # an odd line the snippet parser cannot read: the generic advice stands
        return None


def verdict(b: Breakdown, findings: list[Finding], record: RunRecord) -> dict[str, str]:
    if b.steps == 0:
        return {
            "bound": "unknown",
            "sentence": "No training steps were seen: no optimizer step, backward or "
            "DataLoader batch ran under the doctor.",
        }
    s = b.phase_share
    sides = {
        "input": s["data_wait"],
        "transfer": s["transfer"],
        "logging": s["logging"],
        "checkpoint": s["checkpoint"],
        "collective": s.get("collective", 0.0),
    }
    side, share = max(sides.items(), key=lambda kv: kv[1])
    if share >= 0.20:
        words = {
            "input": "waiting for the DataLoader",
            "transfer": "copying batches to the device",
            "logging": "logging and writing synchronously",
            "checkpoint": "saving checkpoints synchronously",
            "collective": "waiting for the other ranks in all-reduce (the merged report names the rank they wait for)",
        }
        top = findings[0] if findings else None
        gain = (
            f"; fixing it should give about {top.expected_speedup:.1f}× ({top.check})"
            if top and top.expected_speedup
            else ""
        )
        return {
            "bound": side,
            "sentence": f"{side.capitalize()}-bound: {share * 100:.0f}% of each training step is "
            f"spent {words[side]}{gain}.",
        }
    if s["other"] >= 0.30 and s["other"] > s["compute"]:
        where = b.top_lines[0] if b.top_lines else None
        at = f", most at {os.path.basename(where['file'])}:{where['line']} `{where['code']}`" if where else ""
        return {
            "bound": "unknown",
            "sentence": f"{s['other'] * 100:.0f}% of step time is in your own code outside "
            f"the model, the loader and I/O{at}.",
        }
    return {
        "bound": "compute",
        "sentence": f"Compute-bound: the supply line keeps up — {s['compute'] * 100:.0f}% of "
        f"step time is the model's own work and the DataLoader wait is {s['data_wait'] * 100:.0f}%.",
    }


def all_findings(record: RunRecord, b: Breakdown, sig: SupplySignal, commands: dict[str, str | None]) -> list[Finding]:
    found = (
        input_findings(record, b, sig, commands)
        + transfer_finding(record, b)
        + logging_finding(record, b)
        + checkpoint_finding(record, b)
        + host_findings(record, sig)
    )
    rank = {"high": 0, "medium": 1, "low": 2}
    found.sort(key=lambda f: (rank[f.severity], -f.share_of_step_time))
    return found
