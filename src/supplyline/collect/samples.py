"""Typed sample records of the monitor. Units live in the field names.

A sample is one reading of the host at one instant; rates (per second, %) are over the interval
since the previous sample. ``to_dict`` gives the JSONL form documented in docs/monitor.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class CpuSample:
    busy_pct: float  # all cores together, 0..100 (100 = every core busy)
    per_core_busy_pct: list[float]
    user_pct: float
    system_pct: float
    iowait_pct: float
    load_1m: float
    load_5m: float
    load_15m: float


@dataclass
class MemorySample:
    total_bytes: int
    used_bytes: int
    available_bytes: int
    page_cache_bytes: int
    swap_used_bytes: int
    swap_in_bytes_per_s: float
    swap_out_bytes_per_s: float


@dataclass
class DiskSample:
    """One block device over the interval, the fields of ``iostat -x``."""

    device: str
    reads_per_s: float
    writes_per_s: float
    read_mb_per_s: float  # MB = 2**20 bytes, as `iostat -m`
    write_mb_per_s: float
    r_await_ms: float
    w_await_ms: float
    aqu_sz: float
    util_pct: float


@dataclass
class GpuSample:
    index: int
    name: str
    util_pct: float | None
    memory_util_pct: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    pcie_rx_mb_per_s: float | None
    pcie_tx_mb_per_s: float | None
    sm_clock_mhz: int | None
    power_w: float | None
    temperature_c: int | None


@dataclass
class ProcessSample:
    pid: int
    ppid: int
    name: str
    role: str  # "root" for the watched process, "child" for a descendant
    cpu_pct: float  # 100 = one core fully busy
    rss_bytes: int
    status: str
    read_bytes_per_s: float | None  # None where /proc/PID/io is not readable
    write_bytes_per_s: float | None


@dataclass
class Sample:
    time_unix_s: float
    elapsed_s: float
    cpu: CpuSample
    memory: MemorySample
    disks: list[DiskSample] = field(default_factory=list)
    gpus: list[GpuSample] = field(default_factory=list)
    processes: list[ProcessSample] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


def _plain(obj: Any) -> Any:
    # dataclasses.asdict deep-copies every value and costs twice as much (52 vs 29 µs a sample,
    # measured here); the monitor writes one per sample, so the cheaper walk is worth it.
    if hasattr(obj, "__dataclass_fields__"):
        return {name: _plain(getattr(obj, name)) for name in obj.__dataclass_fields__}
    if isinstance(obj, list):
        return [_plain(item) for item in obj]
    return obj


def flatten(sample: Sample, per_process: bool = False) -> dict[str, float | None]:
    """One sample as flat ``metric name -> number``; the names end in their unit (``_pct``, ``_bytes``).

    Host metrics keep the same names from sample to sample, which the CSV log and the summary rely
    on. The process tree is summed into ``tree.*``; ``per_process=True`` adds ``proc.PID.*`` too
    (names that come and go with the processes, so the CSV leaves them out).
    """
    out: dict[str, float | None] = {}
    cpu = sample.cpu
    for key in ("busy_pct", "user_pct", "system_pct", "iowait_pct", "load_1m", "load_5m", "load_15m"):
        out[f"cpu.{key}"] = getattr(cpu, key)
    for i, busy in enumerate(cpu.per_core_busy_pct):
        out[f"cpu.core{i}.busy_pct"] = busy
    for key, value in asdict(sample.memory).items():
        out[f"memory.{key}"] = value
    for disk in sample.disks:
        for key, value in asdict(disk).items():
            if key != "device":
                out[f"disk.{disk.device}.{key}"] = value
    for gpu in sample.gpus:
        for key, value in asdict(gpu).items():
            if key not in ("index", "name"):
                out[f"gpu{gpu.index}.{key}"] = value
    if sample.processes:
        procs = sample.processes
        out["tree.processes"] = len(procs)
        out["tree.cpu_pct"] = sum(p.cpu_pct for p in procs)
        out["tree.root_cpu_pct"] = sum(p.cpu_pct for p in procs if p.role == "root")
        out["tree.children_cpu_pct"] = sum(p.cpu_pct for p in procs if p.role != "root")
        out["tree.rss_bytes"] = sum(p.rss_bytes for p in procs)
        out["tree.read_bytes_per_s"] = sum(p.read_bytes_per_s or 0.0 for p in procs)
        out["tree.write_bytes_per_s"] = sum(p.write_bytes_per_s or 0.0 for p in procs)
    if per_process:
        for p in sample.processes:
            out[f"proc.{p.pid}.cpu_pct"] = p.cpu_pct
            out[f"proc.{p.pid}.rss_bytes"] = p.rss_bytes
    return out
