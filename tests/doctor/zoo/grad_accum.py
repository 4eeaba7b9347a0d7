"""Gradient accumulation: 4 batches per optimizer update."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    model = nn.Linear(32, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(960, 32), torch.randint(0, 2, (960,)))
    for i, (x, y) in enumerate(DataLoader(data, batch_size=8)):
        (nn.functional.cross_entropy(model(x), y) / 4).backward()
        if (i + 1) % 4 == 0:
            opt.step()
            opt.zero_grad()
