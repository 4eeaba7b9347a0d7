"""Planted: synchronous logging with an fsync every step."""

import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    # One intra-op thread: on a crowded 2-core machine, OpenMP threads spinning against other jobs
    # would drown the planted cause in scheduling noise.
    torch.set_num_threads(1)
    log = open(os.path.join(sys.argv[1], "train.log"), "a")
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(20000, 64), torch.randint(0, 10, (20000,)))
    for step, (x, y) in enumerate(DataLoader(data, batch_size=32)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        for _ in range(20):
            log.write(f"step {step} loss {loss.item():.4f}\n")
            log.flush()
            os.fsync(log.fileno())
