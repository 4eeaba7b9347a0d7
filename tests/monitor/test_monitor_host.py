"""Host figures against independent readings: iostat -x on a real read load, /proc/stat for CPU."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import threading
import time

import psutil
import pytest

from supplyline.collect.host import CpuReader, DiskCounters, DiskReader, MemoryReader, device_of, disk_rates
from supplyline.collect.sampler import Monitor

MIB = 2**20


def test_disk_rates_follow_iostat_definitions() -> None:
    before = DiskCounters(
        reads=100, read_bytes=0, read_ms=50, writes=10, write_bytes=0, write_ms=5, io_ms=1000, weighted_ms=2000
    )
    after = DiskCounters(
        reads=300,
        read_bytes=400 * MIB,
        read_ms=450,
        writes=20,
        write_bytes=20 * MIB,
        write_ms=45,
        io_ms=1500,
        weighted_ms=3000,
    )
    d = disk_rates(before, after, "vdx", 2.0)
    assert (d.reads_per_s, d.writes_per_s) == (100.0, 5.0)
    assert (d.read_mb_per_s, d.write_mb_per_s) == (200.0, 10.0)
    assert d.r_await_ms == pytest.approx(2.0)  # 400 ms over 200 reads
    assert d.w_await_ms == pytest.approx(4.0)
    assert d.aqu_sz == pytest.approx(0.5)  # 1000 weighted ms over 2000 ms
    assert d.util_pct == pytest.approx(25.0)  # 500 busy ms over 2000 ms


def _proc_stat_busy() -> tuple[float, float]:
    with open("/proc/stat") as fh:
        fields = [float(x) for x in fh.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice; guest is inside user already
    total = sum(fields[:8])
    return total - fields[3] - fields[4], total


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc/stat")
def test_cpu_busy_matches_proc_stat() -> None:
    reader = CpuReader()
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        busy0, total0 = _proc_stat_busy()
        reader.read()
        time.sleep(1.0)
        sample = reader.read()
        busy1, total1 = _proc_stat_busy()
    finally:
        stop.set()
        spinner.join()
    assert sample is not None
    direct = 100.0 * (busy1 - busy0) / (total1 - total0)
    assert direct > 20  # the spinner kept at least part of a core busy
    assert sample.busy_pct == pytest.approx(direct, abs=3.0)
    assert len(sample.per_core_busy_pct) == os.cpu_count()
    assert statistics.mean(sample.per_core_busy_pct) == pytest.approx(sample.busy_pct, abs=1.0)
    assert sample.user_pct + sample.system_pct + sample.iowait_pct <= 100.0 + 1e-6


def test_cpu_reader_portable_path_agrees_with_procfs() -> None:
    fast, portable = CpuReader(), CpuReader()
    portable._procfs = False  # the psutil path other systems take
    fast.read(), portable.read()
    time.sleep(0.5)
    a, b = fast.read(), portable.read()
    assert a is not None and b is not None
    assert len(a.per_core_busy_pct) == len(b.per_core_busy_pct)
    assert a.busy_pct == pytest.approx(b.busy_pct, abs=5.0)


def test_memory_reader_reports_sane_amounts() -> None:
    reader = MemoryReader()
    assert reader.read() is None  # first read sets the swap baseline
    mem = reader.read()
    assert mem is not None
    assert 0 < mem.available_bytes <= mem.total_bytes
    assert 0 < mem.used_bytes < mem.total_bytes
    assert mem.page_cache_bytes >= 0 and mem.swap_in_bytes_per_s >= 0
    # Same definitions as psutil (read straight from /proc on Linux): the totals agree exactly,
    # the moving amounts closely.
    vm, swap = psutil.virtual_memory(), psutil.swap_memory()
    assert mem.total_bytes == vm.total
    assert mem.available_bytes == pytest.approx(vm.available, rel=0.02)
    assert mem.used_bytes == pytest.approx(vm.used, rel=0.1, abs=64 * MIB)
    assert mem.page_cache_bytes == pytest.approx(vm.cached, rel=0.1, abs=64 * MIB)
    assert mem.swap_used_bytes == pytest.approx(swap.used, abs=64 * MIB)


def test_disk_reader_lists_whole_devices_only() -> None:
    reader = DiskReader()
    reader.read()
    disks = reader.read()
    assert disks is not None
    names = {d.device for d in disks}
    if os.path.isdir("/sys/block"):
        assert names <= set(os.listdir("/sys/block"))
    assert all(0.0 <= d.util_pct <= 100.0 for d in disks)


def _write_cold_file(path: str, size: int) -> None:
    chunk = os.urandom(8 * MIB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for _ in range(size // len(chunk)):
            os.write(fd, chunk)
        os.fsync(fd)  # dirty pages cannot be evicted: write them out first
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read_cold_until(path: str, stop: threading.Event) -> None:
    """Read the file again and again, evicting its pages at each pass so every read hits the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        while not stop.is_set():
            if not os.read(fd, 4 * MIB):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.lseek(fd, 0, os.SEEK_SET)
    finally:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("iostat") is None, reason="iostat (sysstat) not installed")
def test_disk_figures_match_iostat_on_a_cold_read(tmp_path) -> None:
    path = str(tmp_path / "cold.bin")
    _write_cold_file(path, 1024 * MIB)
    device = device_of(path)
    if device is None:
        pytest.skip("the file's block device is not visible in /sys (overlay or tmpfs)")
    seconds = 8
    env = dict(os.environ, LC_ALL="C")
    iostat = subprocess.Popen(
        ["iostat", "-x", "-d", "-m", "-y", "-o", "JSON", "1", str(seconds), device],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    stop = threading.Event()
    reader = threading.Thread(target=_read_cold_until, args=(path, stop))
    with Monitor(interval=1.0, log=None, gpu=False, tree=False) as monitor:
        time.sleep(1.0)
        reader.start()
        time.sleep(seconds - 2.5)
        stop.set()
        reader.join()
        out, _ = iostat.communicate(timeout=30)
        # iostat printed its last report: take the monitor's seconds over the same span.
    stats = json.loads(out)["sysstat"]["hosts"][0]["statistics"]
    io_read = [s["disk"][0]["rMB/s"] for s in stats]
    io_util = [s["disk"][0]["util"] for s in stats]
    ours = [next(d for d in s.disks if d.device == device) for s in monitor.samples[:seconds]]
    our_read = [d.read_mb_per_s for d in ours]
    our_util = [d.util_pct for d in ours]
    assert max(io_read) > 50, f"no real read load reached {device}: {io_read}"
    # The load starts a second after both and ends 1.5 s before both stop, so each window holds all
    # of it: the mean over the window compares them however the two clocks' seconds interleave.
    # (This disk swings 1-3.6 GB/s from one second to the next, so single seconds are not compared.)
    assert len(io_read) == len(our_read) == seconds
    assert statistics.mean(our_read) == pytest.approx(statistics.mean(io_read), rel=0.15)
    assert statistics.mean(our_util) == pytest.approx(statistics.mean(io_util), rel=0.15)
