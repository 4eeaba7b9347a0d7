"""Planted: storage latency with idle workers. Each read waits 15 ms the way a slow network file
system does (emulated with a sleep: the worker is idle, not computing)."""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowStorage(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        time.sleep(0.015)
        return torch.randn(64), i % 10


if __name__ == "__main__":
    # One intra-op thread: on a crowded 2-core machine, OpenMP threads spinning against other jobs
    # would drown the planted cause in scheduling noise.
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowStorage(), batch_size=8, num_workers=2)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
