"""Planted: a MosaicML ``streaming.StreamingDataset`` over MDS shards (written by ``MDSWriter`` into
a local folder) whose ``__getitem__`` does per-sample Python work, in a torch ``DataLoader`` with
``num_workers=0`` (the starved case).

python mosaic_starved.py --prepare DIR      write the shards (4096 samples) into DIR
python mosaic_starved.py STEPS DIR [--workers N] [--healthy]
  --healthy: a cheap sample and a slower model step: the loader keeps up.
"""

import os
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader


def arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def prepare(folder: str) -> None:
    from streaming import MDSWriter

    with MDSWriter(out=folder, columns={"x": "ndarray:float32:64", "y": "int"}, size_limit="256kb") as out:
        for i in range(4096):
            rng = np.random.default_rng(i)
            out.write({"x": rng.standard_normal(64).astype(np.float32), "y": i % 10})


def spin(cost_s: float) -> None:
    """A Python loop standing in for decoding and augmentation."""
    t = time.perf_counter()
    acc = 0.0
    while time.perf_counter() - t < cost_s:
        for k in range(64):
            acc = acc * 0.5 + k


def main() -> None:
    if sys.argv[1] == "--prepare":
        prepare(sys.argv[2])
        return
    from streaming import StreamingDataset

    class Samples(StreamingDataset):
        """The subclass the library's docs show: ``__getitem__`` decodes a sample (here: CPU work)."""

        def __init__(self, cost_s: float, **kwargs) -> None:
            super().__init__(**kwargs)
            self.cost_s = cost_s

        def __getitem__(self, idx: int) -> dict:
            sample = super().__getitem__(idx)
            spin(self.cost_s)
            return {"x": torch.from_numpy(sample["x"].copy()), "y": int(sample["y"])}

    steps, folder = int(sys.argv[1]), sys.argv[2]
    if not os.path.exists(os.path.join(folder, "index.json")):
        sys.exit(f"{folder}: no MDS shards there (run with --prepare first)")
    workers = int(arg("--workers", "0"))
    healthy = "--healthy" in sys.argv
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ds = Samples(0.00002 if healthy else 0.001, local=folder, shuffle=True, batch_size=16)
    width = 4096 if healthy else 128
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    # --workers N: the fix as the doctor writes it (prefetch_factor=4, persistent_workers), by hand
    more = {"prefetch_factor": 4, "persistent_workers": True} if workers else {}
    loader = DataLoader(ds, batch_size=16, num_workers=workers, **more)
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
