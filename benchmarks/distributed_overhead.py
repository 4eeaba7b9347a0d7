"""Cost of the doctor on a DDP job: the same 2-rank gloo job under plain torchrun and under
`supplyline doctor --nproc-per-node 2`, alternated, timed by the script itself (its training loop,
rank 0). Prints the ratio doctor/plain per round and the median. Run: python benchmarks/distributed_overhead.py
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
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([os.path.join(HERE, "..", "src"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    m = re.search(r"rank 0 final loss \S+ loop_s (\d+\.\d{4})", out.stdout + out.stderr)
    if not m:
        raise SystemExit(f"no timing in output:\n{out.stdout}\n{out.stderr}")
    return float(m.group(1))


def main(rounds: int = 3) -> None:
    ratios = []
    for i in range(rounds):
        plain = loop_seconds([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *JOB])
        with tempfile.TemporaryDirectory() as out:
            doctor = loop_seconds([sys.executable, "-m", "supplyline", "doctor", "--nproc-per-node", "2", "--no-what-if",
                                   "--quiet", "--out", out, *JOB])
        ratios.append(doctor / plain)
        print(f"round {i + 1}: plain {plain:.3f} s, doctor {doctor:.3f} s, ratio {doctor / plain:.3f}")
    print(f"median ratio doctor/plain: {statistics.median(ratios):.3f} (400 DDP steps per rank, 2 ranks, gloo, CPU)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
