"""Cost of the doctor on a DDP job, as ratios.

1. The same 2-rank gloo job under plain torchrun and under `supplyline doctor --nproc-per-node 2`,
   alternated, timed by the script itself (its training loop, rank 0).
2. The timed communication hook alone: one process (a gloo world of one), DDP's built-in C++
   all-reduce vs our Python hook around the same all-reduce, alternated in the same process.

Run: PYTHONPATH=src python benchmarks/distributed_overhead.py [ROUNDS]
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "tests", "distributed", "zoo", "ddp_train.py")
JOB = [TRAIN, "--destroy", "--samples", "6400", "--hidden", "512"]  # 400 steps per rank


def loop_seconds(argv: list[str]) -> float:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([os.path.join(HERE, "..", "src"), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    m = re.search(r"rank 0 final loss \S+ loop_s (\d+\.\d{4})", out.stdout + out.stderr)
    if not m:
        raise SystemExit(f"no timing in output:\n{out.stdout}\n{out.stderr}")
    return float(m.group(1))


def main(rounds: int = 3) -> None:
    ratios = []
    for i in range(rounds):
        plain = loop_seconds(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *JOB]
        )
        with tempfile.TemporaryDirectory() as out:
            doctor = loop_seconds(
                [
                    sys.executable,
                    "-m",
                    "supplyline",
                    "doctor",
                    "--nproc-per-node",
                    "2",
                    "--no-what-if",
                    "--quiet",
                    "--out",
                    out,
                    *JOB,
                ]
            )
        ratios.append(doctor / plain)
        print(f"round {i + 1}: plain {plain:.3f} s, doctor {doctor:.3f} s, ratio {doctor / plain:.3f}")
    print(f"median ratio doctor/plain: {statistics.median(ratios):.3f} (400 DDP steps per rank, 2 ranks, gloo, CPU)")


def hook_only(rounds: int, steps: int = 300) -> None:
    import socket
    import time

    import torch
    import torch.distributed as dist
    from torch import nn

    sys.path.insert(0, os.path.join(HERE, "..", "src"))
    from supplyline.collect.collectives import BucketTimer, TimedCommHook, timed_allreduce

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1)

    def run(timed: bool) -> float:
        model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 4)))
        if timed:
            model.register_comm_hook(TimedCommHook(BucketTimer(), model.process_group), timed_allreduce)
        x, y = torch.randn(8, 64), torch.randint(0, 4, (8,))
        t = time.perf_counter()
        for _ in range(steps):
            nn.functional.cross_entropy(model(x), y).backward()
        return (time.perf_counter() - t) / steps

    ratios = []
    for _ in range(rounds):
        builtin, timed = run(False), run(True)
        ratios.append(timed / builtin)
        print(
            f"backward+all-reduce: built-in {builtin * 1e3:.3f} ms, timed hook {timed * 1e3:.3f} ms, "
            f"ratio {timed / builtin:.3f}"
        )
    print(f"median ratio timed hook/built-in: {statistics.median(ratios):.3f} ({steps} backwards, world of one)")
    dist.destroy_process_group()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    hook_only(n)
    main(n)
