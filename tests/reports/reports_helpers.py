"""Helpers for the report tests: the zoo, a CLI runner usable from session fixtures, monitor samples.

Records from real runs carry the host monitor's samples, but a short test run gets only the few
its once-a-second sampling happened to take, and never a GPU on a CPU machine. ``with_monitor``
replaces them with dense samples of known values on the run's own time axis, so the plots, the
trace counters and the live panel can be checked with CPU, worker, disk and GPU data.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from typing import Any

from supplyline.record import RunRecord

ZOO = os.path.join(os.path.dirname(__file__), "zoo")
XSS = "<script>alert(1)</script>"  # contains "/", so it becomes two nested directories in the path


def zoo(name: str) -> str:
    return os.path.join(ZOO, name)


def supplyline(args: list[str], cwd: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m supplyline ARGS`` in a child process (as tests/conftest.py's run_cli, usable from
    session-scoped fixtures). The timeout guards against hangs only."""
    return subprocess.run(
        [sys.executable, "-m", "supplyline", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def child_env() -> dict[str, str]:
    """The environment with this supplyline importable from any working directory (a relative
    PYTHONPATH=src would break once the child changes directory)."""
    import supplyline

    src = os.path.dirname(os.path.dirname(os.path.abspath(supplyline.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return env


def doctor_run(workdir: str, out: str, script: str, *script_args: str) -> str:
    proc = supplyline(
        ["doctor", "--quiet", "--steps", "12", "--what-if-steps", "5", "--out", out, script, *script_args], cwd=workdir
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def with_monitor(record: RunRecord, gpus: int = 1, workers: int = 2, interval_s: float = 0.25) -> RunRecord:
    """A copy of ``record`` with monitor samples every ``interval_s`` over its steps: 2 cores, memory,
    two disks (one idle), ``gpus`` GPUs and ``workers`` DataLoader workers (the second starts halfway)."""
    data = copy.deepcopy(record.to_dict())
    st = data["steps"]
    end = max(s + d for s, d in zip(st["start_s"], st["duration_s"])) if st["start_s"] else 2.0
    t0 = data["created_unix_s"] - 100.0
    samples: list[dict[str, Any]] = []
    n = int(end / interval_s) + 2
    for k in range(n):
        busy = 40.0 + 50.0 * (k % 4) / 3
        procs = [
            {
                "pid": 4242,
                "ppid": 1,
                "name": "python",
                "role": "root",
                "cpu_pct": 95.0,
                "rss_bytes": 800 << 20,
                "status": "running",
                "read_bytes_per_s": 0.0,
                "write_bytes_per_s": 0.0,
            }
        ]
        for w in range(workers):
            if w == 1 and k < n // 2:
                continue
            procs.append(
                {
                    "pid": 5000 + w,
                    "ppid": 4242,
                    "name": "pt_data_worker",
                    "role": "child",
                    "cpu_pct": 60.0 + 10 * w,
                    "rss_bytes": 300 << 20,
                    "status": "running",
                    "read_bytes_per_s": 1e6,
                    "write_bytes_per_s": 0.0,
                }
            )
        samples.append(
            {
                "time_unix_s": t0 + k * interval_s,
                "elapsed_s": k * interval_s,
                "cpu": {
                    "busy_pct": busy,
                    "per_core_busy_pct": [busy, 100.0 - busy / 2],
                    "user_pct": busy * 0.8,
                    "system_pct": busy * 0.2,
                    "iowait_pct": 1.0,
                    "load_1m": 1.5,
                    "load_5m": 1.2,
                    "load_15m": 1.0,
                },
                "memory": {
                    "total_bytes": 24 << 30,
                    "used_bytes": (6 << 30) + k * (1 << 24),
                    "available_bytes": 17 << 30,
                    "page_cache_bytes": 3 << 30,
                    "swap_used_bytes": 0,
                    "swap_in_bytes_per_s": 0.0,
                    "swap_out_bytes_per_s": 0.0,
                },
                "disks": [
                    {
                        "device": "nvme0n1",
                        "reads_per_s": 300.0,
                        "writes_per_s": 2.0,
                        "read_mb_per_s": 40.0 + k,
                        "write_mb_per_s": 0.5,
                        "r_await_ms": 0.3,
                        "w_await_ms": 1.0,
                        "aqu_sz": 0.2,
                        "util_pct": 30.0 + k % 10,
                    },
                    {
                        "device": "loop0",
                        "reads_per_s": 0.0,
                        "writes_per_s": 0.0,
                        "read_mb_per_s": 0.0,
                        "write_mb_per_s": 0.0,
                        "r_await_ms": 0.0,
                        "w_await_ms": 0.0,
                        "aqu_sz": 0.0,
                        "util_pct": 0.0,
                    },
                ],
                "gpus": [
                    {
                        "index": g,
                        "name": "Test GPU",
                        "util_pct": 20.0 + 5 * (k % 6),
                        "memory_util_pct": 10.0,
                        "memory_used_bytes": 1 << 30,
                        "memory_total_bytes": 80 << 30,
                        "pcie_rx_mb_per_s": 100.0,
                        "pcie_tx_mb_per_s": 5.0,
                        "sm_clock_mhz": 1500,
                        "power_w": 200.0,
                        "temperature_c": 50,
                    }
                    for g in range(gpus)
                ],
                "processes": procs,
            }
        )
    data["monitor"] = {"interval_s": interval_s, "samples": samples, "gpu_note": None, "t0_unix_s": t0}
    data["notes"] = [n for n in data["notes"] if "monitor" not in n]
    return RunRecord.from_dict(data)


def without_monitor(record: RunRecord) -> RunRecord:
    """A copy of ``record`` as a run without a host monitor records it: no samples, one note."""
    data = copy.deepcopy(record.to_dict())
    data["monitor"] = {"interval_s": 0.5, "samples": [], "gpu_note": None}
    data["notes"] = [*data["notes"], "host monitor unavailable: test record without one"]
    return RunRecord.from_dict(data)
