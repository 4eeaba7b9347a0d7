"""Loaders beyond torch's DataLoader: `supplyline run --apply` against the unchanged planted job and
against the same setting written by hand, alternating.

    PYTHONPATH=src python benchmarks/loaders.py [--steps 200] [--repeats 5]
    PYTHONPATH=src python benchmarks/loaders.py --hook-cost
    PYTHONPATH=src python benchmarks/loaders.py --nodes [--steps 150] [--repeats 5]
    PYTHONPATH=src python benchmarks/loaders.py --wds [--steps 200] [--repeats 5]
    PYTHONPATH=src python benchmarks/loaders.py --loop [--steps 200] [--repeats 5]
    PYTHONPATH=src python benchmarks/loaders.py --hf [--steps 200] [--repeats 5]
    PYTHONPATH=src python benchmarks/loaders.py --litdata [--steps 200] [--repeats 5]
    PYTHONPATH=src python benchmarks/loaders.py --mosaic [--steps 200] [--repeats 5]


The job (tests/loaders/zoo/stateful_starved.py: torchdata's StatefulDataLoader, 1 ms of Python work
per sample, 16 samples a batch, ``num_workers=0``) prints its own steps/s from its second step to
its last, so every arm is timed by the same code and start-up is left out. Runs alternate (plain,
run --apply, by hand, plain, ...) so drift on a shared machine hits every arm alike; each result is
the ratio of medians to the plain arm with the min-max spread of the per-round ratios. The load
average is printed beside it: on a crowded host the workers compete with other jobs.

``--nodes``: the torchdata.nodes job (tests/loaders/zoo/nodes_starved.py: ParallelMapper with one
thread worker, 4 ms of Python work per sample, 8 a batch) unchanged, with 2 thread workers (what
more threads give Python work under the GIL), and with the doctor's fix written by hand (2 process
workers, prefetch_factor=4); the doctor cannot apply it, so there is no `run --apply` arm.

``--wds``: the WebDataset job (tests/loaders/zoo/wds_starved.py: a WebLoader over 4 tar shards, 1 ms of
Python work per sample, 16 a batch, ``num_workers=0``) unchanged, under `run --apply`, and by hand.

``--loop``: no loader object (tests/loaders/zoo/getbatch_starved.py: nanoGPT's ``get_batch`` on a
memmap, 0.8 ms of Python work per window, 16 a batch) unchanged, with the doctor's fix written by hand
(``get_batch`` in an IterableDataset under a DataLoader with N workers), and with the other fix it names
for read-bound loops (a background thread filling a queue); the doctor cannot apply either.

``--hf``: Hugging Face datasets (tests/loaders/zoo/hf_starved.py: a map-style ``Dataset`` whose
``set_transform`` does 1 ms of Python work per sample, 16 a batch, in a DataLoader with
``num_workers=0``) unchanged, under `run --apply`, and by hand.

``--litdata``: LitData (tests/loaders/zoo/litdata_starved.py: a ``StreamingDataset`` over chunks
``litdata.optimize`` wrote, whose ``transform`` does 1 ms of Python work per sample, 16 a batch, in a
``StreamingDataLoader`` with ``num_workers=0``) unchanged, under `run --apply`, and by hand.

``--mosaic``: MosaicML streaming (tests/loaders/zoo/mosaic_starved.py: a ``StreamingDataset`` subclass
over MDS shards whose ``__getitem__`` does 1 ms of Python work per sample, 16 a batch, in a torch
DataLoader with ``num_workers=0``) unchanged, under `run --apply`, and by hand. It needs an
environment where ``import streaming`` works (torchvision: see docs/loaders.md).

``--hook-cost``: what the nesting guard adds to each hooked fetch, in-process, on an iterator whose
fetch costs nothing: the base hook (torch's DataLoader: one test of an empty set) and an override's
hook (StatefulDataLoader: the thread marked inside it), each against the timed body alone,
alternating, median and range of 7 rounds of 200k calls.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from run_apply import rate  # the same "rate N steps/s" reader (the script's own folder is on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(os.path.dirname(HERE), "tests", "loaders", "zoo", "stateful_starved.py")
WDS_JOB = os.path.join(os.path.dirname(HERE), "tests", "loaders", "zoo", "wds_starved.py")
NODES_JOB = os.path.join(os.path.dirname(HERE), "tests", "loaders", "zoo", "nodes_starved.py")
LOOP_JOB = os.path.join(os.path.dirname(HERE), "tests", "loaders", "zoo", "getbatch_starved.py")
HF_JOB = os.path.join(os.path.dirname(HERE), "tests", "loaders", "zoo", "hf_starved.py")
LITDATA_JOB = os.path.join(os.path.dirname(HERE), "tests", "loaders", "zoo", "litdata_starved.py")
CHUNKS = os.path.join(tempfile.gettempdir(), "supplyline-bench-litdata")  # written here on first use
MOSAIC_JOB = os.path.join(os.path.dirname(HERE), "tests", "loaders", "zoo", "mosaic_starved.py")
MDS = os.path.join(tempfile.gettempdir(), "supplyline-bench-mosaic")  # written here on first use
TOKENS = os.path.join(tempfile.gettempdir(), "supplyline-bench-tokens")  # written by the job on first use
SHARDS = os.path.join(tempfile.gettempdir(), "supplyline-bench-wds")  # written by the job on first use
SPEC = "num_workers={n},prefetch_factor=4,persistent_workers"


def hook_cost(rounds: int = 7, calls: int = 200_000) -> None:
    from supplyline.collect.steps import StepClock
    from supplyline.collect.torch_hooks import Controller, TorchHooks

    class Iterator:  # what the hook reads of a DataLoader iterator
        _num_yielded = 1
        _supplyline_loader_id = 1
        _dataset = None

    def fetch(it: Any) -> int:
        return 0

    hooks = TorchHooks(StepClock(), Controller())
    bare = hooks._timed_next(fetch, nested_passes=False)
    it = Iterator()

    def per_call_ns(f: Any) -> float:
        t = time.perf_counter()
        for _ in range(calls):
            f(it)
        return (time.perf_counter() - t) / calls * 1e9

    for name, hooked in (("base hook", hooks._wrap_next(fetch)), ("override hook", hooks._wrap_override_next(fetch))):
        deltas, body = [], []
        for _ in range(rounds):
            body.append(per_call_ns(bare))
            deltas.append(per_call_ns(hooked) - body[-1])
        print(
            f"{name}: +{statistics.median(deltas):.0f} ns a fetch (range {min(deltas):.0f} to {max(deltas):.0f}) "
            f"over the timed body's {statistics.median(body):.0f} ns"
        )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hook-cost", action="store_true", help="the nesting guard's cost per fetch, in-process")
    parser.add_argument("--nodes", action="store_true", help="the torchdata.nodes job: threads vs the doctor's fix")
    parser.add_argument("--wds", action="store_true", help="the WebDataset WebLoader job")
    parser.add_argument("--loop", action="store_true", help="the job with no loader object (get_batch)")
    parser.add_argument("--hf", action="store_true", help="the Hugging Face datasets job")
    parser.add_argument("--litdata", action="store_true", help="the LitData StreamingDataLoader job")
    parser.add_argument("--mosaic", action="store_true", help="the MosaicML StreamingDataset job")
    args = parser.parse_args()
    if args.hook_cost:
        hook_cost()
        return
    spec = SPEC.format(n=args.workers)
    n, steps = str(args.workers), str(args.steps)
    if args.litdata and not os.path.exists(os.path.join(CHUNKS, "index.json")):
        subprocess.run([sys.executable, LITDATA_JOB, "--prepare", CHUNKS], check=True, capture_output=True)
    if args.mosaic and not os.path.exists(os.path.join(MDS, "index.json")):
        subprocess.run([sys.executable, MOSAIC_JOB, "--prepare", MDS], check=True, capture_output=True)
    plain_job = (
        [HF_JOB, steps]
        if args.hf
        else [LITDATA_JOB, steps, CHUNKS]
        if args.litdata
        else [MOSAIC_JOB, steps, MDS]
        if args.mosaic
        else [JOB, steps]
    )
    arms = (
        {
            "unchanged (get_batch in the loop)": [sys.executable, LOOP_JOB, TOKENS, steps],
            f"the fix by hand (IterableDataset, DataLoader with {n} workers)": [
                *(sys.executable, LOOP_JOB, TOKENS, steps, "--workers", n)
            ],
            "a background thread filling a queue": [sys.executable, LOOP_JOB, TOKENS, steps, "--thread"],
        }
        if args.loop
        else {
            "unchanged (1 thread worker)": [sys.executable, NODES_JOB, steps],
            f"{n} thread workers": [sys.executable, NODES_JOB, steps, "--workers", n],
            f'the fix by hand ({n} workers, method="process", prefetch_factor=4)': [
                *(sys.executable, NODES_JOB, steps, "--workers", n, "--method", "process", "--prefetch", "4")
            ],
        }
        if args.nodes
        else {
            "unchanged": [sys.executable, WDS_JOB, SHARDS, steps],
            f"run --apply {spec}": [sys.executable, "-m", "supplyline", "run", "--apply", spec, WDS_JOB, SHARDS, steps],
            "by hand": [sys.executable, WDS_JOB, SHARDS, steps, "--workers", n],
        }
        if args.wds
        else {
            "unchanged": [sys.executable, *plain_job],
            f"run --apply {spec}": [sys.executable, "-m", "supplyline", "run", "--apply", spec, *plain_job],
            "by hand": [sys.executable, *plain_job, "--workers", n],
        }
    )
    rates: dict[str, list[float]] = {name: [] for name in arms}
    for i in range(args.repeats):
        for name, command in arms.items():
            rates[name].append(rate(command))
        print(f"round {i + 1}: " + ", ".join(f"{name} {r[-1]:.1f}" for name, r in rates.items()) + " steps/s")
    plain = next(iter(rates.values()))  # the unchanged arm
    for name, r in rates.items():
        line = f"{name}: median {statistics.median(r):.1f} steps/s (range {min(r):.1f}-{max(r):.1f})"
        if r is not plain:
            ratios = [a / p for p, a in zip(plain, r)]
            line += (
                f"; {statistics.median(r) / statistics.median(plain):.2f}x the unchanged job "
                f"(per-round ratios {min(ratios):.2f}-{max(ratios):.2f}, {args.repeats} alternating rounds)"
            )
        print(line)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
