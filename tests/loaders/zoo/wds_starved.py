"""Planted: a WebDataset pipeline over tar shards, loaded with webdataset's WebLoader (a DataLoader
inside a pipeline), per-sample Python work in the dataset's map, ``num_workers=0``.

python wds_starved.py SHARD_DIR STEPS [--workers N] [--healthy]   (writes 4 shards of 400 samples on first use)
  --healthy: no per-sample work and a larger model: the loader keeps up.
"""

import glob
import io
import os
import sys
import time

import numpy as np
import torch
import webdataset as wds
from torch import nn


def write_shards(root: str) -> list[str]:
    os.makedirs(root, exist_ok=True)
    paths = sorted(glob.glob(os.path.join(root, "shard-*.tar")))
    if len(paths) == 4:
        return paths
    rng = np.random.default_rng(0)
    for s in range(4):
        tmp = os.path.join(root, f"shard-{s:03d}.tar.tmp")
        with wds.TarWriter(tmp) as sink:
            for i in range(400):
                buf = io.BytesIO()
                np.save(buf, rng.standard_normal(64).astype("float32"))
                sink.write({"__key__": f"{s:03d}{i:05d}", "x.npy": buf.getvalue(), "cls": str(i % 10).encode()})
        os.replace(tmp, tmp[: -len(".tmp")])  # a shard is whole or absent
    return sorted(glob.glob(os.path.join(root, "shard-*.tar")))


COST_S = 0.0 if "--healthy" in sys.argv else 0.001


def prep(sample):
    x, y = sample
    t = time.perf_counter()
    acc = 0.0
    while time.perf_counter() - t < COST_S:  # a Python loop standing in for decoding and augmenting
        for k in range(64):
            acc = acc * 0.5 + k
    return torch.from_numpy(np.load(io.BytesIO(x))), int(y)


def main():
    root, steps = sys.argv[1], int(sys.argv[2])
    workers = int(sys.argv[sys.argv.index("--workers") + 1]) if "--workers" in sys.argv else 0
    torch.set_num_threads(1)
    torch.manual_seed(0)
    urls = write_shards(root)
    dataset = (
        wds.WebDataset(urls, shardshuffle=False, nodesplitter=wds.single_node_only, empty_check=False)
        .repeat()
        .to_tuple("x.npy", "cls")
        .map(prep)
        .batched(16)
    )
    extra = {"prefetch_factor": 4, "persistent_workers": True} if workers else {}
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=workers, **extra)
    width = 3072 if "--healthy" in sys.argv else 128
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    first = None
    step = 0
    for step, (x, y) in enumerate(loader):
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


if __name__ == "__main__":
    main()
