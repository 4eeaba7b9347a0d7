"""The producer side: DataLoader configuration, worker CPU, and the prep-vs-fetch cross-signal.

The cross-signal (docs/how-it-works.md): the trainer waits on data while the workers are busy ->
preprocessing is too slow (prep stall); the trainer waits while the workers sit idle -> they wait on
storage (fetch stall). With ``num_workers=0`` the training thread loads the data itself, so its own
CPU time during the waits tells the same story.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal

from supplyline import phases as P
from supplyline.collect.events import LoaderInfo
from supplyline.collect.samples import Sample
from supplyline.record import RunRecord

# "none": the step did not wait on data (the report's word; the signal itself never says it).
Stall = Literal["prep", "fetch", "mixed", "unknown", "none"]
WAIT, WAIT_CPU = f"{P.DATA_WAIT}_s", f"{P.DATA_WAIT}_cpu_s"  # step columns

# Share of the CPU a worker could get (a core, or less when the host is crowded) that it used.
BUSY_WORKER_SHARE = 0.6
IDLE_WORKER_SHARE = 0.3


@dataclass
class SupplySignal:
    loader: LoaderInfo | None
    stall: Stall
    workers_seen: int
    worker_cpu_pct_mean: float | None  # per worker, 100 = one core
    host_cpu_busy_pct_mean: float | None
    trainer_cpu_share_in_wait: float | None  # num_workers=0: CPU time / wall time while waiting
    evidence: str
    swap_bytes_per_s: float
    # Cores other processes kept busy while the observed steps ran: the host's busy CPU less this
    # job's process tree (trainer and workers). Workers added by a fix compete with these too.
    other_cores_busy: float = 0.0
    # Cores the training process beyond its training thread kept busy (torch's intra-op threads,
    # mostly: a conv net on all cores); None without samples. Workers added take cores from these.
    intra_op_cores: float | None = None
    # Thread workers whose CPU, with the training thread's, stays at about one core: the GIL holds them.
    gil_bound: bool = False


def _window_samples(record: RunRecord) -> list[Sample]:
    """Monitor samples taken while observed steps ran."""
    samples = record.monitor.samples
    obs = record.observed_steps
    t0 = record.monitor.t0_unix_s
    if not samples or not obs or t0 is None:
        return samples
    st = record.steps
    lo = t0 + st["start_s"][obs[0]]
    hi = t0 + st["start_s"][obs[-1]] + st["duration_s"][obs[-1]]
    inside = [s for s in samples if lo <= s.time_unix_s <= hi + 0.5]
    return inside or samples


def job_cores(record: RunRecord) -> float | None:
    """Mean cores this job's process tree (trainer and workers) kept busy while its observed steps
    ran, from the host monitor; None without samples."""
    samples = [s for s in _window_samples(record) if s.processes]
    if not samples:
        return None
    return statistics.mean(sum(p.cpu_pct for p in s.processes) / 100.0 for s in samples)


def other_cores_busy(samples: list[Sample], cores: int) -> float:
    """Mean cores busy outside this job's process tree over ``samples`` (0 with no samples)."""
    if not samples:
        return 0.0
    outside = [max(0.0, s.cpu.busy_pct / 100.0 * cores - sum(p.cpu_pct for p in s.processes) / 100.0) for s in samples]
    return statistics.mean(outside)


def supply_signal(record: RunRecord) -> SupplySignal:
    samples = _window_samples(record)
    signal = _supply_signal(record, samples)
    signal.other_cores_busy = other_cores_busy(samples, record.host.cpu_count)
    # Thread workers (torchdata.nodes) are in the process's CPU beside torch's own threads: there it
    # is the workers' (judged in _thread_workers), not threads that compete with them.
    thread_workers = signal.loader is not None and signal.loader.worker_method == "thread"
    signal.intra_op_cores = None if thread_workers else intra_op_cores(record, samples)
    return signal


def intra_op_cores(record: RunRecord, samples: list[Sample]) -> float | None:
    """The training process's cores (all its threads, from the monitor) less its training thread's
    (the step clock's thread CPU over the observed steps): what the model's own threads use."""
    root = [p.cpu_pct for s in samples for p in s.processes if p.role == "root"]
    st, obs = record.steps, record.observed_steps
    if not root or not obs or "cpu_s" not in st:
        return None
    wall = sum(st["duration_s"][i] for i in obs)
    thread = sum(st["cpu_s"][i] for i in obs) / wall if wall > 0 else 0.0
    return max(0.0, statistics.mean(root) / 100.0 - thread)


def _supply_signal(record: RunRecord, samples: list[Sample]) -> SupplySignal:
    loader = record.train_loader
    workers = loader.num_workers if loader else 0
    host_busy = statistics.mean(s.cpu.busy_pct for s in samples) if samples else None
    swap = (
        statistics.mean(s.memory.swap_in_bytes_per_s + s.memory.swap_out_bytes_per_s for s in samples)
        if samples
        else 0.0
    )
    if loader is None:
        return SupplySignal(None, "unknown", 0, None, host_busy, None, "no DataLoader was seen", swap)
    if workers == 0:
        share = _trainer_wait_cpu_share(record)
        stall: Stall = "unknown" if share is None else "prep" if share >= 0.6 else "fetch" if share <= 0.3 else "mixed"
        ev = (
            f"num_workers=0: the training thread loads every batch itself and was on the CPU "
            f"{(share or 0) * 100:.0f}% of its waiting time (relative to the rest of its step)"
        )
        return SupplySignal(loader, stall, 0, None, host_busy, share, ev, swap)
    if loader.worker_method == "thread":
        return _thread_workers(record, samples, loader, host_busy, swap)
    cores = record.host.cpu_count
    if not any(p.role != "root" for s in samples for p in s.processes):
        # No sample in the observed window saw the workers (a short window): the samples of the
        # what-if phases and the rest of the run, where the same workers make the same batches.
        samples = record.monitor.samples
    per_sample, available = [], []
    seen = 0
    for s in samples:
        kids = [p for p in s.processes if p.role != "root"]
        seen = max(seen, len(kids))
        if not kids:
            continue
        per_sample.append(sum(p.cpu_pct for p in kids))
        # The CPU a runnable worker could get: a core, or its fair share when more tasks are
        # runnable than there are cores (a crowded host must not make busy workers look idle).
        available.append(min(100.0, 100.0 * cores / max(s.cpu.load_1m, 1.0)))
    if not per_sample:
        return SupplySignal(
            loader,
            "unknown",
            seen,
            None,
            host_busy,
            None,
            "worker CPU was not measured (no host monitor samples)",
            swap,
        )
    per_worker = statistics.mean(per_sample) / max(workers, 1)
    per_worker_cap = statistics.mean(available)
    utilization = per_worker / per_worker_cap
    if utilization >= BUSY_WORKER_SHARE:
        stall = "prep"
    elif utilization <= IDLE_WORKER_SHARE:
        stall = "fetch"
    else:
        stall = "mixed"
    ev = (
        f"{workers} workers averaged {per_worker:.0f}% of a core each, {utilization * 100:.0f}% of the CPU "
        f"they could get" + (f"; the host CPU was {host_busy:.0f}% busy" if host_busy is not None else "")
    )
    return SupplySignal(loader, stall, seen, per_worker, host_busy, None, ev, swap)


# Python threads share one GIL: a mapper's thread workers and the training thread together using
# little more than one core run Python one at a time, and more threads add no CPU.
GIL_CORES = 1.15


def _thread_workers(
    record: RunRecord, samples: list[Sample], loader: LoaderInfo, host_busy: float | None, swap: float
) -> SupplySignal:
    """Workers that are threads of the training process (a torchdata.nodes ParallelMapper with
    ``method="thread"``): their CPU is the process's less the training thread's."""
    workers = loader.num_workers
    threads = intra_op_cores(record, samples)
    st, obs = record.steps, record.observed_steps
    wall = sum(st["duration_s"][i] for i in obs)
    trainer = sum(st["cpu_s"][i] for i in obs) / wall if wall > 0 and "cpu_s" in st else None
    if threads is None or trainer is None:
        ev = "the thread workers' CPU was not measured (no host monitor samples)"
        return SupplySignal(loader, "unknown", workers, None, host_busy, None, ev, swap)
    per_worker = threads / max(workers, 1) * 100.0
    gil = threads + trainer <= GIL_CORES and threads / max(workers, 1) >= 0.3
    stall: Stall
    if gil:
        stall = "prep"
        ev = (
            f"{workers} thread worker(s) used {threads:.2f} cores and the training thread {trainer:.2f}: together "
            f"about one core, the GIL's limit for Python work in threads (more threads add no CPU)"
        )
    else:
        utilization = per_worker / 100.0
        stall = "prep" if utilization >= BUSY_WORKER_SHARE else "fetch" if utilization <= IDLE_WORKER_SHARE else "mixed"
        ev = f"{workers} thread worker(s) averaged {per_worker:.0f}% of a core each (the process's CPU less the training thread's)"
    return SupplySignal(loader, stall, workers, per_worker, host_busy, None, ev, swap, gil_bound=gil)


def _trainer_wait_cpu_share(record: RunRecord) -> float | None:
    """With num_workers=0: the training thread's CPU/wall ratio while waiting for data, relative to
    the same ratio over the rest of its steps, so a crowded host does not look like I/O wait."""
    st = record.steps
    obs = record.observed_steps
    wait = sum(st[WAIT][i] for i in obs)
    if wait <= 0:
        return None
    wait_ratio = sum(st[WAIT_CPU][i] for i in obs) / wait
    rest_wall = sum(st["duration_s"][i] - st[WAIT][i] for i in obs)
    rest_cpu = sum(st["cpu_s"][i] - st[WAIT_CPU][i] for i in obs) if "cpu_s" in st else 0.0
    if rest_wall < 0.1 * wait or rest_cpu <= 0:
        return wait_ratio
    return min(1.0, wait_ratio / min(1.0, rest_cpu / rest_wall))
