"""Planted: per-sample Python preprocessing with num_workers=0 (the trainer loads every batch itself)."""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class PythonPrep(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        x = [0.0] * 64
        t = time.perf_counter()
        while time.perf_counter() - t < 0.001:  # a Python loop over "pixels"
            for k in range(64):
                x[k] = x[k] * 0.5 + k
        return torch.tensor(x), i % 10


if __name__ == "__main__":
    # One intra-op thread: on a crowded 2-core machine, OpenMP threads spinning against other jobs
    # would drown the planted cause in scheduling noise.
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(PythonPrep(), batch_size=16, num_workers=0):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
