"""Planted: latency-bound reads (a 3 ms wait a sample, as on network storage) over a dataset of 64
samples, 8 batches an epoch, many epochs: the fix trial's stretches are longer than an epoch.

python short_epoch.py
"""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Remote(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.randn(64), i % 10


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Remote(), batch_size=8, shuffle=True, num_workers=0)
    for _epoch in range(1000):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
