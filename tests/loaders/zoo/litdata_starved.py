"""Planted: a LitData ``StreamingDataset`` (chunks written by ``litdata.optimize`` into a local
folder) whose per-item ``transform`` does per-sample Python work, in a ``StreamingDataLoader``
with ``num_workers=0`` (the starved case).

python litdata_starved.py --prepare DIR      write the optimized chunks (4096 items) into DIR
python litdata_starved.py STEPS DIR [--workers N] [--healthy]
  --healthy: a cheap transform and a slower model step: the loader keeps up.
"""

import os
import sys
import time

import numpy as np
import torch
from torch import nn


def arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def item(i: int) -> dict:
    rng = np.random.default_rng(i)
    return {"x": rng.standard_normal(64).astype(np.float32), "y": i % 10}


class Work:
    """The transform: a Python loop standing in for decoding, ``cost_s`` a sample (picklable for workers)."""

    def __init__(self, cost_s: float) -> None:
        self.cost_s = cost_s

    def __call__(self, sample: dict) -> dict:
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < self.cost_s:
            for k in range(64):
                acc = acc * 0.5 + k
        return {"x": torch.as_tensor(sample["x"]), "y": int(sample["y"])}


def prepare(folder: str) -> None:
    import litdata

    litdata.optimize(fn=item, inputs=list(range(4096)), output_dir=folder, chunk_bytes="256KB", num_workers=1)


def main() -> None:
    if sys.argv[1] == "--prepare":
        prepare(sys.argv[2])
        return
    from litdata import StreamingDataLoader, StreamingDataset

    steps, folder = int(sys.argv[1]), sys.argv[2]
    if not os.path.exists(os.path.join(folder, "index.json")):
        sys.exit(f"{folder}: no optimized dataset there (run with --prepare first)")
    workers = int(arg("--workers", "0"))
    healthy = "--healthy" in sys.argv
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ds = StreamingDataset(folder, shuffle=True, transform=Work(0.00002 if healthy else 0.001))
    width = 4096 if healthy else 128
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    # --workers N: the fix as the doctor writes it (prefetch_factor=4, persistent_workers), by hand
    more = {"prefetch_factor": 4, "persistent_workers": True} if workers else {}
    loader = StreamingDataLoader(ds, batch_size=16, num_workers=workers, **more)
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
