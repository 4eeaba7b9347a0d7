"""Planted: a synchronous checkpoint every 2 steps of a ~32 MB state (a small net plus a large table)."""

import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        self.register_buffer("table", torch.randn(8 * 2**20))  # saved with the weights, like an embedding cache

    def forward(self, x):
        return self.fc(x)


if __name__ == "__main__":
    # One intra-op thread: on a crowded 2-core machine, OpenMP threads spinning against other jobs
    # would drown the planted cause in scheduling noise.
    torch.set_num_threads(1)
    out = sys.argv[1]
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(4096, 64), torch.randint(0, 10, (4096,)))
    for step, (x, y) in enumerate(DataLoader(data, batch_size=16)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 2 == 0:
            torch.save(model.state_dict(), os.path.join(out, "ckpt.pt"))
