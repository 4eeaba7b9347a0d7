"""Planted: a dataset that works in the training process and fails in any DataLoader worker (it
holds a handle a worker cannot use: here, it checks it runs in the process that built it).
Per-sample Python work with num_workers=0, so the doctor recommends workers, and its trial fails.

python worker_only_failure.py
"""

import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class OwnProcessOnly(Dataset):
    def __init__(self):
        self.pid = os.getpid()

    def __len__(self):
        return 100000

    def __getitem__(self, i):
        if os.getpid() != self.pid:
            raise RuntimeError("this dataset's handle is only valid in the process that opened it")
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < 0.001:
            for k in range(64):
                acc = acc * 0.5 + k
        return torch.randn(64), i % 10


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(OwnProcessOnly(), batch_size=16, shuffle=True, num_workers=0):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
