"""Planted: no loader object at all. nanoGPT's ``get_batch``: random windows of a token file read
through ``np.memmap``, stacked into a batch in Python, with per-window Python work standing in for
tokenizing or masking; an AdamW step on a small model.

python getbatch_starved.py DATA_DIR STEPS [--healthy] [--workers N | --thread]
  (writes DATA_DIR/train.bin on first use)
  --healthy: no per-window work and a larger model: building the batch costs little.
  --workers N: the doctor's fix written by hand: get_batch inside an IterableDataset, taken from a
    DataLoader(batch_size=None, num_workers=N, persistent_workers=True, prefetch_factor=4), each
    worker seeding its own RNG (benchmarks/loaders.py --loop).
  --thread: the other fix it names: a background thread filling a queue.Queue(maxsize=2).
"""

import os
import queue
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

BLOCK = 64
BATCH = 16
COST_S = 0.0 if "--healthy" in sys.argv else 0.0008


def write_tokens(root: str) -> str:
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, "train.bin")
    if not os.path.exists(path):
        tmp = path + ".tmp"
        np.random.default_rng(0).integers(0, 512, size=2_000_000, dtype=np.uint16).tofile(tmp)
        os.replace(tmp, path)  # whole or absent
    return path


def get_batch(path: str, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    # nanoGPT re-opens the memmap every batch to avoid a memory leak; so do we.
    data = np.memmap(path, dtype=np.uint16, mode="r")
    ix = rng.integers(0, len(data) - BLOCK - 1, size=BATCH)
    xs, ys = [], []
    for i in ix:
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < COST_S:  # a Python loop standing in for per-window work
            for k in range(64):
                acc = acc * 0.5 + k
        xs.append(torch.from_numpy(data[i : i + BLOCK].astype(np.int64)))
        ys.append(torch.from_numpy(data[i + 1 : i + 1 + BLOCK].astype(np.int64)))
    return torch.stack(xs), torch.stack(ys)


class Batches(torch.utils.data.IterableDataset):
    def __init__(self, path: str) -> None:
        self.path = path

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        info = torch.utils.data.get_worker_info()
        rng = np.random.default_rng(1 + (info.id if info is not None else 0))  # each worker its own batches
        while True:
            yield get_batch(self.path, rng)


def batches_in_thread(path: str, rng: np.random.Generator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    q: queue.Queue[tuple[torch.Tensor, torch.Tensor]] = queue.Queue(maxsize=2)
    threading.Thread(target=lambda: [q.put(get_batch(path, rng)) for _ in iter(int, 1)], daemon=True).start()
    while True:
        yield q.get()


def main() -> None:
    root, steps = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    path = write_tokens(root)
    width = 512 if "--healthy" in sys.argv else 64
    model = nn.Sequential(nn.Embedding(512, width), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 512))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(1)
    source: Iterator[tuple[torch.Tensor, torch.Tensor]] | None = None
    if "--workers" in sys.argv:
        n = int(sys.argv[sys.argv.index("--workers") + 1])
        loader = torch.utils.data.DataLoader(
            Batches(path), batch_size=None, num_workers=n, persistent_workers=True, prefetch_factor=4
        )
        source = iter(loader)
    elif "--thread" in sys.argv:
        source = batches_in_thread(path, rng)
    t0 = time.perf_counter()
    for i in range(steps):
        if i == 1:
            t0 = time.perf_counter()  # from the second step: worker start-up is not the rate
        x, y = get_batch(path, rng) if source is None else next(source)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.view(-1, 512), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print(f"rate {(steps - 1) / (time.perf_counter() - t0):.2f} steps/s", flush=True)


if __name__ == "__main__":
    main()
