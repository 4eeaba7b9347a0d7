"""How much the doctor slows a training job: plain `python job.py` vs `supplyline doctor --no-what-if
job.py`, interleaved repeats in one run, medians, printed as ratios and µs per step.

Both wall time and CPU time (all threads of the process, so the doctor's sampler threads count)
of the training loop are compared; interpreter and torch start-up are outside the measured loop.
The final losses must be identical: the doctor must not change what the job computes.

    python benchmarks/doctor_overhead.py [--repeats 5] [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doctor_overhead_job.py")
RESULT = re.compile(r"RESULT loop_s=(\S+) cpu_s=(\S+) steps=(\d+) loss=(\S+)")


def own_threads_cpu_s(out_dir: str) -> float:
    """CPU time of the doctor's own threads (stack sampler + host monitor), from the saved record."""
    with open(os.path.join(out_dir, "record.json"), encoding="utf-8") as fh:
        sampler = json.load(fh)["sampler"]
    return sampler["cpu_s"] + (sampler.get("monitor_cpu_s") or 0.0)


def run(under_doctor: bool, steps: int, out_dir: str) -> tuple[float, float, int, str]:
    cmd = [sys.executable, JOB, str(steps)]
    if under_doctor:
        cmd = [
            sys.executable,
            "-m",
            "supplyline",
            "doctor",
            "--quiet",
            "--no-what-if",
            "--out",
            out_dir,
            JOB,
            str(steps),
        ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    m = RESULT.search(proc.stdout)
    if m is None:
        raise SystemExit(f"no RESULT line from {' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr}")
    return float(m.group(1)), float(m.group(2)), int(m.group(3)), m.group(4)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=600, help="training steps (one batch and one optimizer step each)")
    args = ap.parse_args()
    out_dir = os.path.join(os.environ.get("TMPDIR", "/tmp"), "supplyline-overhead-report")
    plain_wall, plain_cpu, doc_wall, doc_cpu = [], [], [], []
    losses = set()
    own_cpu: list[float] = []
    n_steps = 0
    for i in range(args.repeats):
        for under in (False, True) if i % 2 == 0 else (True, False):  # alternate the order
            wall, cpu, n_steps, loss = run(under, args.steps, out_dir)
            (doc_wall if under else plain_wall).append(wall)
            (doc_cpu if under else plain_cpu).append(cpu)
            losses.add(loss)
            if under:
                own_cpu.append(own_threads_cpu_s(out_dir))
    pw, dw = statistics.median(plain_wall), statistics.median(doc_wall)
    pc, dc = statistics.median(plain_cpu), statistics.median(doc_cpu)
    print(f"job: {n_steps} optimizer steps per run, {args.repeats} interleaved repeats, medians")
    print(f"{'':14}{'plain':>12}{'doctor':>12}{'ratio':>9}{'µs/step':>10}")
    print(f"{'wall time':14}{pw:11.3f}s{dw:11.3f}s{dw / pw:9.4f}{(dw - pw) / n_steps * 1e6:10.1f}")
    print(f"{'CPU time':14}{pc:11.3f}s{dc:11.3f}s{dc / pc:9.4f}{(dc - pc) / n_steps * 1e6:10.1f}")
    print(f"plain step: {pw / n_steps * 1e3:.2f} ms wall")
    own = statistics.median(own_cpu)
    print(
        f"doctor's own threads (sampler + monitor): {own * 1e3:.1f} ms CPU per run = {own / n_steps * 1e6:.1f} µs "
        f"per step, {own / dw * 100:.2f}% of one core"
    )
    print(f"losses identical across all runs: {len(losses) == 1} ({', '.join(sorted(losses))})")


if __name__ == "__main__":
    main()
