"""Planted: no loader object at all. nanoGPT's ``get_batch``: random windows of a token file read
through ``np.memmap``, stacked into a batch in Python, with per-window Python work standing in for
tokenizing or masking; an AdamW step on a small model.

python getbatch_starved.py DATA_DIR STEPS [--healthy]   (writes DATA_DIR/train.bin on first use)
  --healthy: no per-window work and a larger model: building the batch costs little.
"""

import os
import sys
import time

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


def main() -> None:
    root, steps = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    path = write_tokens(root)
    width = 512 if "--healthy" in sys.argv else 64
    model = nn.Sequential(nn.Embedding(512, width), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 512))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    for _ in range(steps):
        x, y = get_batch(path, rng)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.view(-1, 512), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print(f"rate {steps / (time.perf_counter() - t0):.2f} steps/s", flush=True)


if __name__ == "__main__":
    main()
