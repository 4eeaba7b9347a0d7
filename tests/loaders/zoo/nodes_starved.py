"""Planted: a torchdata.nodes pipeline (SamplerWrapper -> ParallelMapper -> Batcher -> Prefetcher ->
Loader) over per-sample Python work, the mapper with one worker (the starved case) or several.

Prints the pipeline's settings once, the script's own rate at the end, and the first sample indices
of the next batch and of a Loader resumed from ``state_dict()``: equal when resuming works.

python nodes_starved.py STEPS [--workers N] [--method thread|process] [--prefetch N] [--healthy]
  --healthy: cheap samples and a slower model step: the loader keeps up.
"""

import sys
import time

import torch
import torchdata.nodes as tn
from torch import nn
from torch.utils.data import RandomSampler


class PythonPrep:
    def __init__(self, cost_s: float) -> None:
        self.cost_s = cost_s

    def __len__(self):
        return 100000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(int(i))  # the sample depends on its index only
        x = torch.randn(64, generator=g)
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < self.cost_s:  # a Python loop standing in for decoding
            for k in range(64):
                acc = acc * 0.5 + k
        return x, int(i) % 10, int(i)


def collate(items):
    xs, ys, idx = zip(*items)
    return torch.stack(xs), torch.tensor(ys), torch.tensor(idx)


def pipeline(dataset, workers: int, method: str, prefetch: int = 2) -> tn.Loader:
    sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(0))
    node = tn.SamplerWrapper(sampler)
    node = tn.ParallelMapper(node, map_fn=dataset.__getitem__, num_workers=workers, method=method)
    node = tn.Batcher(node, batch_size=8, drop_last=True)
    node = tn.Mapper(node, collate)
    node = tn.Prefetcher(node, prefetch_factor=prefetch)
    return tn.Loader(node)


def arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    steps = int(sys.argv[1])
    workers = int(arg("--workers", "1"))
    method = arg("--method", "thread")
    prefetch = int(arg("--prefetch", "2"))
    healthy = "--healthy" in sys.argv
    torch.set_num_threads(1)
    torch.manual_seed(0)
    width = 1024 if healthy else 128
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    dataset = PythonPrep(0.00005 if healthy else 0.004)
    loader = pipeline(dataset, workers, method, prefetch)
    print(
        f"pipeline ParallelMapper num_workers={workers} method={method} Prefetcher prefetch_factor={prefetch}",
        flush=True,
    )
    first = None
    step = 0
    batches = iter(loader)
    for step, (x, y, _) in enumerate(batches):
        if step == 1:
            first = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 == steps:
            break
    if first is not None and step > 1:
        print(f"rate {(step - 1) / (time.perf_counter() - first):.2f} steps/s", flush=True)
    state = loader.state_dict()
    resumed = pipeline(dataset, workers, method, prefetch)
    resumed.load_state_dict(state)
    again = iter(resumed)
    print(f"next {next(batches)[2][:4].tolist()} resumed {next(again)[2][:4].tolist()}", flush=True)
    # Stop the mappers' workers and threads before the interpreter does: process workers torn down
    # at exit abort it now and then (torchdata 0.11: "terminate called without an active exception").
    for it in (batches, again):
        shutdown(it)


def shutdown(it) -> None:
    seen, todo = set(), [it]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stop = getattr(node, "_shutdown", None)
        if callable(stop):
            stop()
        todo += [getattr(node, name, None) for name in ("root", "source", "_it")]


if __name__ == "__main__":
    main()
