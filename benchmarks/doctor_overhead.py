"""How much the doctor slows a training job: plain `python job.py` vs `supplyline doctor --no-what-if
job.py`, interleaved repeats in one run, medians, printed as ratios and µs per step.

Both wall time and CPU time (all threads of the process, so the doctor's sampler threads count)
of the training loop are compared; interpreter and torch start-up are outside the measured loop.
The final losses must be identical: the doctor must not change what the job computes.

    python benchmarks/doctor_overhead.py [--repeats 5] [--steps 300]
    python benchmarks/doctor_overhead.py --stress [--target-pct 2] [--max-repeats 60]

``--stress``: a ~1 ms step (batch 16, width 64), where a fixed per-step cost weighs most. Plain
and doctor runs alternate in pairs until the 95% bootstrap interval of the median per-pair ratio
(doctor / plain wall time of the loop) is within ±TARGET% (or MAX pairs ran). Pairing cancels the
slow drift of a shared machine's load; the median of the ratios shrugs off one disturbed pair.
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


def run(
    under_doctor: bool, steps: int, out_dir: str, job_args: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> tuple[float, float, int, str]:
    """One run of the job (plain or under the doctor; ``env`` picks the source tree): loop seconds, CPU
    seconds, steps and the last loss."""
    cmd = [sys.executable, JOB, str(steps), *job_args]
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
            *job_args,
        ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    m = RESULT.search(proc.stdout)
    if m is None:
        raise SystemExit(f"no RESULT line from {' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr}")
    return float(m.group(1)), float(m.group(2)), int(m.group(3)), m.group(4)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--steps", type=int, help="training steps (one batch and one optimizer step each); 600, or 2000 with --stress"
    )
    ap.add_argument("--stress", action="store_true", help="~1 ms steps, pairs until the ratio's interval is tight")
    ap.add_argument("--target-pct", type=float, default=2.0, help="--stress: stop at this 95%% half-width")
    ap.add_argument("--min-repeats", type=int, default=10, help="--stress: pairs before the first check")
    ap.add_argument("--max-repeats", type=int, default=60, help="--stress: give up after this many pairs")
    args = ap.parse_args()
    out_dir = os.path.join(os.environ.get("TMPDIR", "/tmp"), "supplyline-overhead-report")
    if args.stress:
        stress(args, out_dir)
        return
    args.steps = args.steps or 600
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


STRESS_JOB = ("16", "64")  # batch, width: about 1 ms of CPU work a step


def stress(args: argparse.Namespace, out_dir: str) -> None:
    from supplyline.analyze.stats import median_interval

    steps = args.steps or 2000
    ratios: list[float] = []
    plain_step_ms: list[float] = []
    cpu_ratios: list[float] = []
    losses = set()
    ci = None
    for i in range(args.max_repeats):
        pair = {}
        for under in (False, True) if i % 2 == 0 else (True, False):
            wall, cpu, _, loss = run(under, steps, out_dir, STRESS_JOB)
            pair[under] = (wall, cpu)
            losses.add(loss)
        ratios.append(pair[True][0] / pair[False][0])
        cpu_ratios.append(pair[True][1] / pair[False][1])
        plain_step_ms.append(pair[False][0] / steps * 1e3)
        if len(ratios) >= args.min_repeats:
            ci = median_interval(ratios)
            print(
                f"  {len(ratios)} pairs: wall ratio {ci.estimate:.4f} [{ci.low:.4f}, {ci.high:.4f}] ±{ci.half_width_pct:.2f}%"
            )
            if ci.half_width_pct <= args.target_pct:
                break
    assert ci is not None
    cpu = median_interval(cpu_ratios)
    step = median_interval(plain_step_ms)
    print(
        f"stress: {steps} steps per run (batch {STRESS_JOB[0]}, width {STRESS_JOB[1]}), {len(ratios)} alternating pairs"
    )
    print(
        f"plain step {step.estimate:.2f} ms wall (95% CI {step.low:.2f}-{step.high:.2f}), min-max pair ratio "
        f"{min(ratios):.3f}-{max(ratios):.3f}"
    )
    print(
        f"doctor/plain wall time: {ci.estimate:.4f} (95% CI {ci.low:.4f}-{ci.high:.4f}, ±{ci.half_width_pct:.2f}%)"
        f" = {(ci.estimate - 1) * step.estimate * 1e3:.0f} µs per step"
    )
    print(f"doctor/plain CPU time:  {cpu.estimate:.4f} (95% CI {cpu.low:.4f}-{cpu.high:.4f})")
    print(f"interval within ±{args.target_pct:g}%: {ci.half_width_pct <= args.target_pct}")
    print(f"losses identical across all runs: {len(losses) == 1}")


if __name__ == "__main__":
    main()
