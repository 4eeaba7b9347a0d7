"""Planted: per-sample Python work loaded with num_workers=0; prints its loader's settings and each loss.

python starved.py STEPS [--exit CODE] [--raise-at STEP] [--val]
"""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class PythonPrep(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)  # the sample depends on its index only, whoever loads it
        x = torch.randn(64, generator=g)
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < 0.001:  # a Python loop standing in for decoding
            for k in range(64):
                acc = acc * 0.5 + k
        return x, i % 10


def main():
    steps = int(sys.argv[1])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(PythonPrep(), batch_size=16, shuffle=True, num_workers=0)
    print(
        f"loader num_workers={loader.num_workers} prefetch_factor={loader.prefetch_factor} "
        f"persistent_workers={loader.persistent_workers}",
        flush=True,
    )
    if "--val" in sys.argv:
        val = DataLoader(PythonPrep(), batch_size=16, num_workers=0)
        print(f"val num_workers={val.num_workers}", flush=True)
    first = None
    for step, (x, y) in enumerate(loader):
        if step == 1:  # the script's own rate: from the second batch on, start-up left out
            first = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}")
        if "--raise-at" in sys.argv and step == int(sys.argv[sys.argv.index("--raise-at") + 1]):
            raise RuntimeError(f"planted failure at step {step}")
        if step + 1 == steps:
            break
    if first is not None and step > 1:
        print(f"rate {(step - 1) / (time.perf_counter() - first):.2f} steps/s", flush=True)
    if "--exit" in sys.argv:
        sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]))


if __name__ == "__main__":
    main()
