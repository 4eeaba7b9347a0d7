"""Planted GPU jobs for the GPU-idle checks: each has one known bottleneck.

    python planted.py --job starved|ahead|pageable|pinned|item|ckpt [--device cuda|cpu] [--steps N]
                      [--profile OUT.json] [--timeline OUT.json]

- starved:  num_workers=0, per-batch CPU work, a short GPU step        -> input
- ahead:    slow loader (8 ms) that keeps up with a 12 ms GPU step, no sync: the CPU waits for data
            but the GPU never does                                      -> compute
- pageable: big pageable batches copied with non_blocking=True         -> transfer
- pinned:   the same batches pinned, non_blocking=True                 -> compute
- item:     the "ahead" job plus loss.item() every step: the sync removes the run-ahead -> input
- ckpt:     torch.save of a 256 MB state every 5 steps                   -> checkpoint

``--profile`` runs the steps under torch.profiler (CPU + CUDA activities) and writes the GPU idle
share from its kernel/memcpy timeline (the truth). ``--timeline`` instruments the loop with
supplyline's CudaTimeline and writes its own GPU idle share (the cross-check). Without either it
runs plainly and writes the median step time with ``--stats``. ``--device cpu`` runs every path
on a CPU machine (idle shares are then meaningless, the code paths are not).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profiler_truth import idle_share_from_trace

EXPECTED = {
    "starved": "input",
    "ahead": "compute",
    "pageable": "transfer",
    "pinned": "compute",
    "item": "input",
    "ckpt": "checkpoint",
}


class SlowBatches(Dataset):
    """Items that cost ``ms`` of host time each (a sleep: the honest stand-in for decode or I/O)."""

    def __init__(self, n: int, shape: tuple[int, ...], ms: float) -> None:
        self.n, self.shape, self.ms = n, shape, ms

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.ms:
            time.sleep(self.ms / 1000.0)
        return torch.ones(self.shape), torch.tensor(i % 10)


def build(job: str, steps: int, device: torch.device) -> tuple[DataLoader, nn.Module, bool, bool]:
    """(loader, model, non_blocking copies, .item() every step). Sizes aim at an H200: the GPU step
    of "ahead" (12 layers of 512x4096 @ 4096x4096, fp32) takes longer than its loader's 8 ms."""
    gpu = device.type == "cuda"
    if job == "starved":
        ds, bs, workers, pin, width, reps = SlowBatches(steps * 32, (1024,), 0.3), 32, 0, False, 4096, 2
    elif job in ("ahead", "item"):
        ds, bs, workers, pin, width, reps = SlowBatches(steps * 8, (64, 1024), 1.0), 8, 0, False, 4096, 12
    elif job in ("pageable", "pinned"):
        ds, bs, workers, pin, width, reps = SlowBatches(steps * 16, (1024, 1024), 0.0), 16, 6, job == "pinned", 1024, 3
    elif job == "ckpt":
        ds, bs, workers, pin, width, reps = SlowBatches(steps * 32, (1024,), 0.0), 32, 2, True, 4096, 4
    else:
        raise SystemExit(f"unknown job {job!r}: one of {', '.join(EXPECTED)}")
    if not gpu:  # the CPU path only proves the code runs: keep it small
        width, reps = 128, 1
    loader = DataLoader(ds, batch_size=bs, num_workers=workers, pin_memory=pin and gpu)
    layers: list[nn.Module] = [nn.Linear(1024, width)] + [nn.Linear(width, width) for _ in range(reps)]
    model = nn.Sequential(*layers, nn.Linear(width, 10)).to(device)
    return loader, model, job in ("pageable", "pinned"), job == "item"


def run(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device(args.device)
    loader, model, non_blocking, item = build(args.job, args.steps + 5, device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    timeline = intervals = None
    if args.timeline:
        from supplyline.analyze.gpu_idle import HostInterval
        from supplyline.collect.cuda_timeline import CudaTimeline

        timeline, intervals = CudaTimeline(), []
    step_times: list[float] = []
    it = iter(loader)
    ckpt = os.path.join(args.scratch, f"planted-{os.getpid()}.pt")
    prof_ctx = _profiler(device) if args.profile else None
    if prof_ctx is not None:
        prof_ctx.__enter__()
    t_prev = time.perf_counter()
    for step in range(args.steps):
        with torch.profiler.record_function("planted_step"):
            w0 = time.perf_counter()
            x, y = next(it)
            w1 = time.perf_counter()
            if timeline is not None:
                intervals.append(HostInterval("data_wait", w0, w1))
                timeline.on_first_work()
            x, y = x.to(device, non_blocking=non_blocking), y.to(device, non_blocking=non_blocking)
            if timeline is not None:
                intervals.append(HostInterval("transfer", w1, time.perf_counter()))
            x = x.reshape(-1, 1024)
            y = y.repeat_interleave(x.shape[0] // y.shape[0])
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if timeline is not None:
                timeline.on_work_queued()
            if item:
                loss.item()
            if args.job == "ckpt" and step % 5 == 4:
                c0 = time.perf_counter()
                torch.save(model.state_dict(), ckpt)
                if timeline is not None:
                    intervals.append(HostInterval("checkpoint", c0, time.perf_counter()))
        now = time.perf_counter()
        step_times.append(now - t_prev)
        if timeline is not None:
            timeline.on_step_boundary(t_prev, now)
        t_prev = now
    if device.type == "cuda":
        torch.cuda.synchronize()
    out: dict[str, Any] = {
        "job": args.job,
        "device": args.device,
        "expected": EXPECTED[args.job],
        "steps": args.steps,
        "step_ms_median": statistics.median(step_times[5:] or step_times) * 1000,
    }
    if prof_ctx is not None:
        prof_ctx.__exit__(None, None, None)
        trace = os.path.join(args.scratch, f"trace-{os.getpid()}.json")
        prof_ctx.export_chrome_trace(trace)
        with open(trace, encoding="utf-8") as fh:
            out["profiler"] = idle_share_from_trace(json.load(fh), "planted_step", skip_first=5)
        if args.keep_trace:
            os.replace(trace, args.keep_trace)
        else:
            os.remove(trace)
    if timeline is not None:
        out["timeline"] = _timeline_result(timeline, intervals)
    if os.path.exists(ckpt):
        os.remove(ckpt)
    return out


def _profiler(device: torch.device) -> Any:
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=acts)


def _timeline_result(timeline: Any, intervals: list[Any]) -> dict[str, Any]:
    from dataclasses import asdict

    from supplyline.analyze.gpu_idle import attribute_gpu_idle, gpu_side

    snap = timeline.snapshot(wait=True)
    res = attribute_gpu_idle(snap.marks, intervals, warmup_steps=5)
    return {
        "available": snap.available,
        "note": snap.note or res.note,
        "idle_share": res.idle_share,
        "by_phase_share": {k: v / res.wall_s for k, v in res.by_phase.items()} if res.wall_s else {},
        "host_phase_share": {k: v / res.wall_s for k, v in res.host_phase_s.items()} if res.wall_s else {},
        "cpu_ahead_ms_median": None if res.cpu_ahead_s_median is None else res.cpu_ahead_s_median * 1000,
        "verdict": gpu_side(res),
        "steps_measured": len(res.steps),
        "first_steps": [asdict(s) for s in res.steps[:3]],
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True, choices=sorted(EXPECTED))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--profile", help="write the profiler's GPU idle share (and step time) here")
    ap.add_argument("--timeline", help="write supplyline's CudaTimeline GPU idle share here")
    ap.add_argument("--stats", help="write the plain run's step time here")
    ap.add_argument("--keep-trace", help="keep the profiler's chrome trace at this path")
    ap.add_argument("--scratch", default=os.environ.get("TMPDIR", "/tmp"))
    a = ap.parse_args()
    result = run(a)
    dest = a.profile or a.timeline or a.stats
    if dest:
        with open(dest + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
        os.replace(dest + ".tmp", dest)
