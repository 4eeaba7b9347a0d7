"""Planted: a Hugging Face ``datasets.Dataset`` (map-style, built in memory) whose ``set_transform``
does per-sample Python work, in a torch DataLoader with ``num_workers=0`` (the starved case).

python hf_starved.py STEPS [--workers N] [--healthy] [--iterable SHARDS]
  --healthy: a cheap transform and a slower model step: the loader keeps up.
  --iterable SHARDS: the same work as ``to_iterable_dataset(num_shards=SHARDS).map(...)``, which
      datasets splits between the workers by shard (a worker past the last shard gets none).
"""

import sys
import time

import datasets
import torch
from torch import nn
from torch.utils.data import DataLoader


def arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def make_transform(cost_s: float):
    def transform(batch):
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < cost_s * len(batch["x"]):  # a Python loop standing in for decoding
            for k in range(64):
                acc = acc * 0.5 + k
        return {"x": [torch.tensor(x, dtype=torch.float32) for x in batch["x"]], "y": batch["y"]}

    return transform


def work(cost_s: float):
    def one(example):
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < cost_s:
            for k in range(64):
                acc = acc * 0.5 + k
        return example

    return one


def main():
    steps = int(sys.argv[1])
    workers = int(arg("--workers", "0"))
    healthy = "--healthy" in sys.argv
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ds = datasets.Dataset.from_dict(
        {"x": torch.randn(4096, 64, generator=g).tolist(), "y": [i % 10 for i in range(4096)]}
    )
    cost = 0.00002 if healthy else 0.001
    if "--iterable" in sys.argv:
        ds = ds.to_iterable_dataset(num_shards=int(arg("--iterable", "1"))).map(work(cost)).with_format("torch")
    else:
        ds.set_transform(make_transform(cost))
    width = 4096 if healthy else 128
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    iterable = "--iterable" in sys.argv
    # --workers N: the fix as the doctor writes it (prefetch_factor=4, persistent_workers), by hand
    more = {"prefetch_factor": 4, "persistent_workers": True} if workers else {}
    loader = DataLoader(ds, batch_size=16, shuffle=not iterable, num_workers=workers, **more)
    first = None
    step = 0
    while step < steps:
        for batch in loader:
            if step == 1:
                first = time.perf_counter()
            loss = nn.functional.cross_entropy(model(batch["x"]), batch["y"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step == steps:
                break
    if first is not None and step > 2:
        print(f"rate {(step - 2) / (time.perf_counter() - first):.2f} steps/s", flush=True)


if __name__ == "__main__":
    main()
