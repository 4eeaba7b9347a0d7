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
        return asdict(self)
