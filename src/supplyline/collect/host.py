"""Host readers: CPU, memory and block devices, as rates over the interval between two reads.

Every reader keeps the previous counters and turns the difference into a rate, the way ``iostat``
and ``mpstat`` do. The first ``read()`` only sets the baseline, so callers prime once, wait one
interval, then read. Nothing here draws or prints: the monitor's view lives in ``render/``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import psutil

from supplyline.collect.procfs import find_int, read_bytes
from supplyline.collect.samples import CpuSample, DiskSample, MemorySample

_MB = float(2**20)
_SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's own sector size
# Virtual devices that exist on every Linux box; listed only once they have done I/O.
_QUIET_PREFIXES = ("loop", "ram", "zram")


_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")


class CpuReader:
    """Busy share per core and in total from per-core CPU time deltas.

    busy = 1 - (idle + iowait) / total, as ``mpstat`` and ``top`` count it: a core waiting for the
    disk is idle for the scheduler even though the job is stalled, so iowait is reported apart.
    The times come from /proc/stat on Linux (psutil.cpu_times(percpu=True) reads the same file but
    costs 33 vs 22 µs a call, measured here) and from psutil elsewhere.
    """

    def __init__(self) -> None:
        self._prev: list[tuple[float, ...]] | None = None
        self._procfs = os.path.exists("/proc/stat")

    def read(self) -> CpuSample | None:
        now = _linux_cpu_times() if self._procfs else _psutil_cpu_times()
        prev, self._prev = self._prev, now
        load_1m, load_5m, load_15m = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
        if prev is None or len(prev) != len(now):
            return None
        per_core: list[float] = []
        total = idle = user = system = iowait = 0.0
        for before, after in zip(prev, now):
            d = [max(0.0, a - b) for a, b in zip(after, before)]
            # Linux counts guest time inside user/nice already; adding it again would double it.
            core_total = sum(d[:8])
            core_idle = d[3] + d[4]
            per_core.append(_pct(core_total - core_idle, core_total))
            total += core_total
            idle += core_idle
            user += d[0] + d[1]
            system += d[2] + d[5] + d[6]
            iowait += d[4]
        return CpuSample(
            busy_pct=_pct(total - idle, total),
            per_core_busy_pct=per_core,
            user_pct=_pct(user, total),
            system_pct=_pct(system, total),
            iowait_pct=_pct(iowait, total),
            load_1m=load_1m,
            load_5m=load_5m,
            load_15m=load_15m,
        )


def _linux_cpu_times() -> list[tuple[float, ...]]:
    """Per-core times in clock ticks, fields in ``_CPU_FIELDS`` order (older kernels give fewer)."""
    cores = []
    for line in read_bytes("/proc/stat").splitlines():
        if line.startswith(b"cpu") and line[3:4].isdigit():
            values = [float(x) for x in line.split()[1:11]]
            cores.append(tuple(values + [0.0] * (10 - len(values))))
    return cores


def _psutil_cpu_times() -> list[tuple[float, ...]]:
    return [tuple(float(getattr(t, f, 0.0)) for f in _CPU_FIELDS) for t in psutil.cpu_times(percpu=True)]


class MemoryReader:
    """RAM, page cache and swap; swap-in/out as a rate of the cumulative counters.

    On Linux it reads /proc/meminfo and /proc/vmstat itself, with psutil's definitions
    (used = total - available, page cache = Cached + SReclaimable): psutil.swap_memory() alone
    costs ~0.1 ms (measured here), a tenth of the whole per-sample budget. psutil elsewhere.
    """

    def __init__(self) -> None:
        self._prev: tuple[float, int, int] | None = None
        self._procfs = os.path.exists("/proc/meminfo") and os.path.exists("/proc/vmstat")

    def read(self) -> MemorySample | None:
        now_s = time.monotonic()
        sample = _linux_memory() if self._procfs else _psutil_memory()
        now = (now_s, int(sample.swap_in_bytes_per_s), int(sample.swap_out_bytes_per_s))  # cumulative bytes here
        prev, self._prev = self._prev, now
        if prev is None:
            return None
        dt = now[0] - prev[0]
        sample.swap_in_bytes_per_s = _rate(now[1] - prev[1], dt)
        sample.swap_out_bytes_per_s = _rate(now[2] - prev[2], dt)
        return sample


def _linux_memory() -> MemorySample:
    """A MemorySample whose swap fields still hold the cumulative swapped-in/out bytes."""
    meminfo = read_bytes("/proc/meminfo")
    vmstat = read_bytes("/proc/vmstat")
    page = os.sysconf("SC_PAGE_SIZE")

    def kb(name: bytes) -> int:
        return find_int(meminfo, name + b":") * 1024

    total = kb(b"MemTotal")
    available = kb(b"MemAvailable") if b"\nMemAvailable:" in meminfo else kb(b"MemFree")
    return MemorySample(
        total_bytes=total,
        used_bytes=total - available,
        available_bytes=available,
        page_cache_bytes=kb(b"Cached") + kb(b"SReclaimable"),
        swap_used_bytes=kb(b"SwapTotal") - kb(b"SwapFree"),
        swap_in_bytes_per_s=find_int(vmstat, b"pswpin") * page,
        swap_out_bytes_per_s=find_int(vmstat, b"pswpout") * page,
    )


def _psutil_memory() -> MemorySample:
    vm, swap = psutil.virtual_memory(), psutil.swap_memory()
    return MemorySample(
        total_bytes=int(vm.total),
        used_bytes=int(vm.used),
        available_bytes=int(vm.available),
        page_cache_bytes=int(getattr(vm, "cached", 0)),
        swap_used_bytes=int(swap.used),
        swap_in_bytes_per_s=float(swap.sin),
        swap_out_bytes_per_s=float(swap.sout),
    )


@dataclass(frozen=True)
class DiskCounters:
    """Cumulative counters of one block device (the fields of /proc/diskstats that iostat -x uses)."""

    reads: int
    read_bytes: int
    read_ms: int
    writes: int
    write_bytes: int
    write_ms: int
    io_ms: int  # time the device had at least one request in flight: gives %util
    weighted_ms: int  # request-time summed over requests in flight: gives aqu-sz


def read_disk_counters() -> dict[str, DiskCounters]:
    """Counters of each whole block device; /proc/diskstats on Linux, psutil elsewhere."""
    if sys.platform.startswith("linux") and os.path.exists("/proc/diskstats"):
        return _linux_disk_counters()
    return _psutil_disk_counters()


_whole_devices: tuple[float, set[str] | None] = (float("-inf"), None)


def _whole_device_names() -> set[str] | None:
    """Names in /sys/block (whole devices, not partitions), re-listed at most every 10 s."""
    global _whole_devices
    if time.monotonic() - _whole_devices[0] > 10.0:
        names = set(os.listdir("/sys/block")) if os.path.isdir("/sys/block") else None
        _whole_devices = (time.monotonic(), names)
    return _whole_devices[1]


def _linux_disk_counters() -> dict[str, DiskCounters]:
    whole = _whole_device_names()
    lines = read_bytes("/proc/diskstats").decode().splitlines()
    out: dict[str, DiskCounters] = {}
    for line in lines:
        f = line.split()
        if len(f) < 14:
            continue
        name = f[2]
        if whole is not None and name not in whole:
            continue  # a partition: its I/O is already in its disk's line
        n = [int(x) for x in f[3:14]]
        if name.startswith(_QUIET_PREFIXES) and not any(n):
            continue
        out[name] = DiskCounters(
            reads=n[0],
            read_bytes=n[2] * _SECTOR_BYTES,
            read_ms=n[3],
            writes=n[4],
            write_bytes=n[6] * _SECTOR_BYTES,
            write_ms=n[7],
            io_ms=n[9],
            weighted_ms=n[10],
        )
    return out


def _psutil_disk_counters() -> dict[str, DiskCounters]:
    # Not every OS gives busy_time or a queue measure: those stay 0 there (documented).
    counters = psutil.disk_io_counters(perdisk=True) or {}
    return {
        name: DiskCounters(
            reads=c.read_count,
            read_bytes=c.read_bytes,
            read_ms=c.read_time,
            writes=c.write_count,
            write_bytes=c.write_bytes,
            write_ms=c.write_time,
            io_ms=getattr(c, "busy_time", 0),
            weighted_ms=0,
        )
        for name, c in counters.items()
    }


def disk_rates(before: DiskCounters, after: DiskCounters, device: str, dt_s: float) -> DiskSample:
    """The ``iostat -x`` figures of one device between two counter readings ``dt_s`` apart."""
    reads = after.reads - before.reads
    writes = after.writes - before.writes
    dt_ms = dt_s * 1000.0
    return DiskSample(
        device=device,
        reads_per_s=_rate(reads, dt_s),
        writes_per_s=_rate(writes, dt_s),
        read_mb_per_s=_rate(after.read_bytes - before.read_bytes, dt_s) / _MB,
        write_mb_per_s=_rate(after.write_bytes - before.write_bytes, dt_s) / _MB,
        r_await_ms=(after.read_ms - before.read_ms) / reads if reads > 0 else 0.0,
        w_await_ms=(after.write_ms - before.write_ms) / writes if writes > 0 else 0.0,
        aqu_sz=_rate(after.weighted_ms - before.weighted_ms, dt_ms),
        util_pct=min(100.0, 100.0 * _rate(after.io_ms - before.io_ms, dt_ms)),
    )


class DiskReader:
    """Per-device ``iostat -x`` rates between consecutive reads."""

    def __init__(self) -> None:
        self._prev: tuple[float, dict[str, DiskCounters]] | None = None

    def read(self) -> list[DiskSample] | None:
        now = (time.monotonic(), read_disk_counters())
        prev, self._prev = self._prev, now
        if prev is None:
            return None
        dt = now[0] - prev[0]
        # A device that appeared since the last read has no baseline yet: it shows up next time.
        return [disk_rates(prev[1][name], counters, name, dt) for name, counters in now[1].items() if name in prev[1]]


def device_of(path: str) -> str | None:
    """The whole block device (as named in /proc/diskstats) that holds ``path``; None if unknown.

    Linux only: follows /sys/dev/block/MAJOR:MINOR, and from a partition up to its disk.
    """
    st = os.stat(path)
    sys_path = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(sys_path):
        return None
    real = os.path.realpath(sys_path)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def _rate(amount: float, seconds: float) -> float:
    return max(0.0, amount) / seconds if seconds > 0 else 0.0
