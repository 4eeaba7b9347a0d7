"""The monitor's own cost while it watches a real job: a training process with 4 DataLoader workers.

For each process backend (procfs, psutil) and each rate (1 Hz, 10 Hz) a Monitor watches the job's
PID; its sampling thread's CPU time (time.thread_time) over its samples gives the CPU per sample and
the share of one core. Then each reader is timed alone, to show where a sample's time goes.
Goal: <= 0.1 % of one core at 1 Hz, i.e. <= 1 ms of CPU per sample.

    PYTHONPATH=src python benchmarks/monitor_overhead.py [--seconds-1hz 12] [--seconds-10hz 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from supplyline.collect.gpu import GpuReader
from supplyline.collect.host import CpuReader, DiskReader, MemoryReader
from supplyline.collect.proctree import ProcessTree
from supplyline.collect.sampler import Monitor
from supplyline.commands.demo import BUNDLED_DEMO

GOAL_MS_AT_1HZ = 1.0


def start_job(seconds: float) -> subprocess.Popen[bytes]:
    job = subprocess.Popen(
        [sys.executable, BUNDLED_DEMO, "--workers", "4", "--seconds", str(seconds)], stdout=subprocess.DEVNULL
    )
    tree = ProcessTree(job.pid, refresh_children_s=0)
    while len(tree.read()) < 5:  # the trainer and its 4 workers
        if job.poll() is not None:
            raise SystemExit("the job ended before its workers started")
        time.sleep(0.2)
    return job


def measure_monitor(pid: int, interval: float, seconds: float, backend: str, log_dir: str) -> dict[str, float]:
    log = os.path.join(log_dir, f"{backend}-{interval}.jsonl")
    with Monitor(interval=interval, log=log, pid=pid, process_backend=backend) as monitor:
        time.sleep(seconds)
    # Steady state: the one-off baseline read at start is left out.
    per_sample_ms = 1000.0 * (monitor.sampler_cpu_s - monitor.prime_cpu_s) / max(1, monitor.sample_count)
    processes = sum(len(s.processes) for s in monitor.samples) / max(1, monitor.sample_count)
    return {
        "samples": monitor.sample_count,
        "per_sample_ms": per_sample_ms,
        "core_pct": per_sample_ms / 1000.0 / interval * 100.0,
        "processes": processes,
    }


def time_call(call: Callable[[], object], repeat: int = 200) -> float:
    """Mean CPU milliseconds of one call, measured on this thread."""
    call()
    began = time.thread_time()
    for _ in range(repeat):
        call()
    return 1000.0 * (time.thread_time() - began) / repeat


def component_costs(pid: int) -> dict[str, float]:
    cpu, memory, disks, gpu = CpuReader(), MemoryReader(), DiskReader(), GpuReader()
    costs = {
        "cpu (/proc/stat)": time_call(cpu.read),
        "memory + swap (/proc/meminfo, /proc/vmstat)": time_call(memory.read),
        "disks (/proc/diskstats)": time_call(disks.read),
        "gpu (NVML)" + ("" if gpu.available else ": not available here"): time_call(gpu.read),
    }
    for backend in ("procfs", "psutil"):
        steady = ProcessTree(pid, refresh_children_s=1e9, backend=backend)
        costs[f"tree read, {backend}"] = time_call(steady.read)
        refreshing = ProcessTree(pid, refresh_children_s=0, backend=backend)
        costs[f"tree read + find children, {backend}"] = time_call(refreshing.read, repeat=50)
    with Monitor(interval=0.05, log=None, pid=pid, gpu=False) as monitor:
        while monitor.sample_count < 1:
            time.sleep(0.05)
    sample = monitor.samples[0]
    with tempfile.TemporaryFile("w") as fh:

        def write() -> None:
            fh.write(json.dumps(sample.to_dict(), separators=(",", ":")) + "\n")
            fh.flush()

        costs["JSONL line: encode + write + flush"] = time_call(write)
    gpu.close()
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds-1hz", type=float, default=12.0)
    parser.add_argument("--seconds-10hz", type=float, default=4.0)
    args = parser.parse_args()
    total = 2 * (args.seconds_1hz + args.seconds_10hz) + 30
    job = start_job(total)
    results: dict[tuple[str, float], dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as log_dir:
            for backend in ("procfs", "psutil"):
                for interval, seconds in ((1.0, args.seconds_1hz), (0.1, args.seconds_10hz)):
                    results[(backend, interval)] = measure_monitor(job.pid, interval, seconds, backend, log_dir)
        costs = component_costs(job.pid)
    finally:
        job.kill()
        job.wait()

    print(f"Monitor overhead while watching a training job with 4 DataLoader workers ({os.cpu_count()} cores)\n")
    print(f"{'backend':8} {'rate':>6} {'samples':>8} {'procs':>6} {'CPU/sample':>11} {'% of 1 core':>12}")
    for (backend, interval), r in results.items():
        print(
            f"{backend:8} {1 / interval:>4.0f}Hz {r['samples']:>8.0f} {r['processes']:>6.1f} "
            f"{r['per_sample_ms']:>8.3f} ms {r['core_pct']:>11.3f}%"
        )
    fast, slow = results[("procfs", 1.0)], results[("psutil", 1.0)]
    print("\nRatios")
    print(
        f"  procfs at 1 Hz vs the goal (1 ms/sample, 0.1% of a core): {fast['per_sample_ms'] / GOAL_MS_AT_1HZ:.2f}x "
        f"({'met' if fast['per_sample_ms'] <= GOAL_MS_AT_1HZ else 'MISSED'})"
    )
    print(f"  psutil / procfs CPU per sample at 1 Hz: {slow['per_sample_ms'] / fast['per_sample_ms']:.2f}x")
    print(f"  10 Hz / 1 Hz share of a core (procfs): {results[('procfs', 0.1)]['core_pct'] / fast['core_pct']:.1f}x")
    print("\nWhere a sample's CPU goes (each reader alone, mean of repeated calls)")
    for name, ms in costs.items():
        print(f"  {name:45} {ms:7.3f} ms")


if __name__ == "__main__":
    main()
